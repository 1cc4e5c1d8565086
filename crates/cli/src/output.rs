//! Everything the binary prints. stdout is for results (and, under `serve`, the protocol
//! only); stderr is for the operator: refusals, the start-up line and logs.
//!
//! stdout is written through [`out`]: a reader that goes away (`vfs journal list | head -1`) ends
//! the output, never the work. `println!` would panic there, in the middle of an undo; stderr
//! is written through [`err`], which ignores a failure.
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use vfs::OperatorMountView;
use vfs_host::{Problems, ToolOutput};

/// Set once stdout could not be written: the rest of the output is dropped.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stderr. A failure is ignored: stderr is where it would be said, and a
/// refusal's exit status still says it (`eprintln!` would panic, exit 101, in the middle of an
/// undo whose stderr is a full disk).
fn err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes()).and_then(|()| stderr.flush());
}

/// Writes `text` to stdout. Once a write fails, the output stops there and the command goes on
/// to its end and its own exit status: a closed pipe is the reader's choice and says nothing;
/// any other failure is said once on stderr.
fn out(text: &str) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        STDOUT_GONE.store(true, Ordering::Relaxed);
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            err(&format!("warning: cannot write to stdout ({error}); the rest of the output is dropped\n"));
        }
    }
}

/// `error: <message>`, then a blank line and `hint: <hint>` when there is one.
pub(crate) fn error(message: &str, hint: Option<&str>) {
    match hint {
        Some(hint) => err(&format!("error: {message}\n\nhint: {hint}\n")),
        None => err(&format!("error: {message}\n")),
    }
}

/// Every launch refusal, each as an `error:` line with its hint.
pub(crate) fn problems(problems: &Problems) {
    for (index, problem) in problems.iter().enumerate() {
        if index > 0 {
            err("\n");
        }
        error(&problem.to_string(), problem.hint().as_deref());
    }
}

/// One status line for the operator, on stderr.
pub(crate) fn status(line: &str) {
    err(&format!("{line}\n"));
}

/// One line on stdout.
pub(crate) fn line(line: &str) {
    out(&format!("{line}\n"));
}

/// Text on stdout, with exactly one final newline.
pub(crate) fn text(text: &str) {
    if text.ends_with('\n') {
        out(text);
    } else {
        out(&format!("{text}\n"));
    }
}

/// Pretty JSON on stdout.
pub(crate) fn json(value: &serde_json::Value) {
    out(&format!("{}\n", serde_json::to_string_pretty(value).unwrap_or_default()));
}

/// What the agent sees of a tool result: its text, and a note for media content.
pub(crate) fn tool_output(output: &ToolOutput) {
    text(&output.text);
    for note in &output.notes {
        text(note);
    }
    if let Some(media) = &output.media {
        out(&format!("[{} content: {} bytes of base64]\n", media.mime_type, media.data.len()));
    }
}

/// The operator's mount table; an override that loosens a name rule says which.
pub(crate) fn mount_table(views: &[OperatorMountView], loosened: &[vfs::Loosening]) {
    let mut rows: Vec<[String; 5]> = vec![[
        "ROOT".to_owned(),
        "RIGHTS".to_owned(),
        "VISIBILITY".to_owned(),
        "ORIGIN".to_owned(),
        "PHYSICAL".to_owned(),
    ]];
    let mut views: Vec<&OperatorMountView> = views.iter().collect();
    views.sort_by(|left, right| left.root.cmp(&right.root));
    for view in views {
        let origin = match &view.id {
            Some(id) => format!("{} [id {id}]", view.origin),
            None => view.origin.clone(),
        };
        rows.push([
            view.root.clone(),
            view.rights.to_string(),
            view.visibility.to_string(),
            origin,
            view.physical.clone(),
        ]);
        for item in &view.overrides {
            let place = format!("{}/{}", view.root, item.path());
            let mut origin = format!("override of {}", view.root);
            for loosening in loosened.iter().filter(|loosening| loosening.place == place) {
                origin.push_str(&format!(", loosens `{}`", loosening.glob));
            }
            rows.push([place, item.rights().to_string(), view.visibility.to_string(), origin, String::new()]);
        }
    }
    print_table(&rows);
}

/// Prints rows as columns padded to their widest cell (the last column unpadded).
fn print_table(rows: &[[String; 5]]) {
    let mut widths = [0usize; 5];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (index, (cell, width)) in row.iter().zip(widths).enumerate() {
            if index + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        out(&format!("{}\n", line.trim_end()));
    }
}

/// The name rules agents are held to, after the mount table: one row per rule, a mount-string
/// rule written as the virtual path pattern it matches (`/src/**/*.key`), and after a name rule
/// the places where an override of a mount string loosened it (`/p/.git  writable (rw)`).
pub(crate) fn name_rules(rules: &[vfs::NameRule], loosened: &[vfs::Loosening]) {
    if rules.is_empty() {
        return;
    }
    let mut rows: Vec<[String; 5]> =
        vec![["RULE".to_owned(), "EFFECT".to_owned(), "CLASS".to_owned(), "ORIGIN".to_owned(), "EXCEPT".to_owned()]];
    let mut shown = vec![false; loosened.len()];
    for rule in rules {
        let glob = match &rule.scope {
            Some(root) => format!("{root}/{}", rule.glob),
            None => rule.glob.clone(),
        };
        rows.push([
            glob,
            rule.effect.as_str().to_owned(),
            rule.class.clone(),
            rule.origin.clone(),
            rule.except.join(", "),
        ]);
        if rule.scope.is_some() {
            continue;
        }
        for (loosening, shown) in loosened.iter().zip(&mut shown) {
            if loosening.glob == rule.glob && !*shown {
                *shown = true;
                rows.push([
                    loosening.place.clone(),
                    format!("writable ({})", loosening.rights),
                    loosening.class.clone(),
                    loosening.origin.clone(),
                    String::new(),
                ]);
            }
        }
    }
    out("\n");
    print_table(&rows);
}

/// Logs to stderr (`VFS_LOG` sets the filter, default `warn`); a tool call's warnings also go
/// to its MCP client as `notifications/message` (`vfs_host::ClientLogLayer`).
pub(crate) fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{Layer as _, filter::LevelFilter};

    // The default needs no `EnvFilter`: its directive parser compiles a regular expression,
    // a cost every start of the server paid before it could answer `initialize`.
    let operator = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false);
    let client = vfs_host::ClientLogLayer.with_filter(LevelFilter::INFO);
    let registry = tracing_subscriber::registry().with(client);
    if let Ok(directives) = std::env::var("VFS_LOG") {
        let filter = tracing_subscriber::EnvFilter::try_new(directives)
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp::service=error"));
        let _ = registry.with(operator.with_filter(filter)).try_init();
    } else {
        let filter = tracing_subscriber::filter::Targets::new()
            .with_default(LevelFilter::WARN)
            .with_target("rmcp::service", LevelFilter::ERROR);
        let _ = registry.with(operator.with_filter(filter)).try_init();
    }
}

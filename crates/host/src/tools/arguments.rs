//! Tool arguments against the tool's input schema, before anything runs.
//!
//! The specification (SEP-1303, 2025-11-25) asks that input a tool cannot use come back as a
//! tool result the model reads, not as a JSON-RPC error that a client turns into an exception
//! the model never sees. So every argument is checked here against the same schema
//! `tools/list` shows, and a mismatch becomes one line that names the argument and how to
//! write it. What the schema allows, clients write in more than one way: `null` for an
//! optional argument means "not given", and a whole number written `2.0` is the number 2.
//! Unknown keys are dropped and named in a note, so a prompt written for another server
//! still gets its answer.

use rmcp::model::Tool;
use serde_json::{Map, Value};

/// The arguments made ready for the tool's parser, and the unknown keys that were dropped;
/// or one line saying what is wrong.
pub(super) fn check(tool: &Tool, arguments: &Value) -> Result<(Value, Vec<String>), String> {
    let empty = Map::new();
    let properties = tool.input_schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let Value::Object(given) = arguments else {
        return Err("the arguments must be a JSON object".to_owned());
    };
    let mut ignored = Vec::new();
    let mut checked = Map::new();
    for (key, value) in given {
        if properties.contains_key(key) {
            checked.insert(key.clone(), value.clone());
        } else {
            ignored.push(key.clone());
        }
    }
    let mut checked = Value::Object(checked);
    whole_numbers(&mut checked);
    check_fields("", &mut checked, &tool.input_schema)?;
    Ok((checked, ignored))
}

/// Checks an object's fields against `schema` (its `properties` and `required`); `null` for a
/// field means it was not given.
fn check_fields(prefix: &str, value: &mut Value, schema: &Map<String, Value>) -> Result<(), String> {
    let Value::Object(fields) = value else { return Ok(()) };
    fields.retain(|_, field| !field.is_null());
    let empty = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    for (key, field) in fields.iter_mut() {
        if let Some(Value::Object(field_schema)) = properties.get(key) {
            check_value(&format!("{prefix}{key}"), field, field_schema)?;
        }
    }
    let required = schema.get("required").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        if !fields.contains_key(name) {
            let what = properties.get(name).and_then(|field| field.get("description")).and_then(Value::as_str);
            return Err(match what {
                Some(what) => format!("`{prefix}{name}` is missing; add it: {}", lower_first(what)),
                None => format!("`{prefix}{name}` is missing; add it"),
            });
        }
    }
    Ok(())
}

/// The refusal of unknown keys by a tool whose default acts on what no argument names
/// (`undo_changes`: with no `count` or `changeId`, the newest change).
pub(super) fn unknown_refusal(tool: &Tool, unknown: &[String]) -> String {
    let plural = if unknown.len() == 1 { "argument" } else { "arguments" };
    let names: Vec<String> = unknown.iter().map(|key| format!("`{key}`")).collect();
    let taken: Vec<String> = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().map(|key| format!("`{key}`")).collect())
        .unwrap_or_default();
    format!(
        "unknown {plural} {} (`{}` takes {}); nothing was done: an argument it cannot read is not taken for its default",
        names.join(", "),
        tool.name,
        taken.join(", ")
    )
}

/// The note for unknown keys: which were ignored, and which the tool takes.
pub(super) fn ignored_note(tool: &Tool, ignored: &[String]) -> String {
    let names =
        |keys: &mut dyn Iterator<Item = &str>| keys.map(|key| format!("`{key}`")).collect::<Vec<_>>().join(", ");
    let taken = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| names(&mut properties.keys().map(String::as_str)))
        .unwrap_or_default();
    let plural = if ignored.len() == 1 { "argument" } else { "arguments" };
    let takes = if taken.is_empty() { "no arguments".to_owned() } else { taken };
    format!(
        "[ignored unknown {plural} {}: `{}` takes {takes}]",
        names(&mut ignored.iter().map(String::as_str)),
        tool.name
    )
}

/// 2^53: every whole number up to it is exact in an `f64`, and so in an `i64`.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `2.0` is 2: a float with no fraction becomes an integer, at any depth.
fn whole_numbers(value: &mut Value) {
    match value {
        Value::Number(number) if number.is_f64() => {
            let Some(float) = number.as_f64() else { return };
            if float.fract() == 0.0 && float.abs() <= EXACT {
                #[expect(clippy::cast_possible_truncation, reason = "a whole number within 2^53")]
                let whole = float as i64;
                *value = Value::from(whole);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

fn check_value(key: &str, value: &mut Value, schema: &Map<String, Value>) -> Result<(), String> {
    let expected = schema.get("type").and_then(Value::as_str);
    let fits = match expected {
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.is_array(),
        Some("object") => value.is_object(),
        _ => true,
    };
    if !fits
        && expected == Some("integer")
        && let Some(float) = value.as_f64().filter(|float| float.fract() == 0.0)
    {
        // A whole number past 2^53 (`whole_numbers` made every one within it an integer),
        // written short (`-1e300` has 301 digits).
        if let Some(minimum) = schema.get("minimum").and_then(Value::as_i64)
            && float < 0.0
        {
            return Err(format!("`{key}` must be {minimum} or more, not {float:e}"));
        }
        let (past, side) = if float > 0.0 { ("large", "") } else { ("small", "-") };
        return Err(format!(
            "`{key}` is too {past}: give a whole number between -{EXACT} and {EXACT}, not {side}{:e}",
            float.abs()
        ));
    }
    if !fits {
        return Err(format!(
            "`{key}` must be {}, not {}; write it like {}",
            describe(expected, schema),
            kind_of(value),
            example(key, expected, schema)
        ));
    }
    if let (Some(minimum), Some(number)) = (schema.get("minimum").and_then(Value::as_i64), value.as_i64())
        && number < minimum
    {
        return Err(format!("`{key}` must be {minimum} or more, not {number}"));
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let choices: Vec<String> = allowed.iter().map(|choice| format!("`{}`", plain(choice))).collect();
        return Err(format!("`{key}` must be one of {}, not `{}`", choices.join(", "), plain(value)));
    }
    if let (Some(Value::Object(items)), Value::Array(values)) = (schema.get("items"), &mut *value) {
        for (index, item) in values.iter_mut().enumerate() {
            let item_key = format!("{key}[{index}]");
            let item_type = items.get("type").and_then(Value::as_str);
            if item_type == Some("string") && !item.is_string() {
                return Err(format!(
                    "`{item_key}` must be a string, not {}; `{key}` is a list of strings, like `\"{key}\": [\"…\"]`",
                    kind_of(item)
                ));
            }
            check_value(&item_key, item, items)?;
        }
    }
    if expected == Some("object") {
        check_fields(&format!("{key}."), value, schema)?;
    }
    Ok(())
}

fn describe(expected: Option<&str>, schema: &Map<String, Value>) -> String {
    match expected {
        Some("string") if schema.get("enum").is_some() => "one of the listed words".to_owned(),
        Some("string") => "a string".to_owned(),
        Some("integer") => "a whole number".to_owned(),
        Some("number") => "a number".to_owned(),
        Some("boolean") => "`true` or `false`".to_owned(),
        Some("array") => match schema.get("items").and_then(|items| items.get("type")).and_then(Value::as_str) {
            Some("string") => "a list of strings".to_owned(),
            Some("object") => "a list of objects".to_owned(),
            _ => "a list".to_owned(),
        },
        Some("object") => "an object".to_owned(),
        _ => "a value".to_owned(),
    }
}

fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => format!("`{flag}`"),
        Value::Number(number) => format!("the number {number}"),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn example(key: &str, expected: Option<&str>, schema: &Map<String, Value>) -> String {
    let value = match expected {
        Some("string") => match schema.get("enum").and_then(Value::as_array).and_then(|choices| choices.first()) {
            Some(first) => format!("\"{}\"", plain(first)),
            None => "\"…\"".to_owned(),
        },
        Some("integer" | "number") => "10".to_owned(),
        Some("boolean") => "true".to_owned(),
        Some("array") => match schema.get("items").and_then(|items| items.get("type")).and_then(Value::as_str) {
            Some("string") => "[\"…\"]".to_owned(),
            _ => "[{…}]".to_owned(),
        },
        Some("object") => "{…}".to_owned(),
        _ => "…".to_owned(),
    };
    let key = key.rsplit('.').next().unwrap_or(key);
    let key = key.split('[').next().unwrap_or(key);
    format!("`\"{key}\": {value}`")
}

/// A JSON value as plain text: a string without its quotes.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

//! The tools' schemas: the structured content of the results that are not the core's own
//! types, and how a Rust type becomes a portable input or output schema (ADR 0004).

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaGenerator, SchemaSettings};
use serde_json::{Value, json};

/// `list_mounts`' structured content.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub(super) struct MountsOutput {
    /// The mounts you can use.
    pub(super) mounts: Vec<vfs::MountInfo>,
}

/// `list_allowed_directories`' structured content.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub(super) struct AllowedOutput {
    /// The virtual roots you can use.
    pub(super) directories: Vec<String>,
}

/// `read_media_file`'s structured content (the data is in the image, audio or embedded resource
/// content).
#[derive(Debug, serde::Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct MediaOutput {
    /// The virtual path read.
    pub(super) path: vfs::VirtualPath,
    /// The MIME type.
    pub(super) mime_type: String,
    /// Size in bytes.
    pub(super) size: u64,
}

/// `read_multiple_files`' structured content.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub(super) struct FilesOutput {
    /// One result per path, in the order given.
    pub(super) files: Vec<FileOutput>,
}

/// One file of `read_multiple_files`.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub(super) struct FileOutput {
    /// The path as given.
    pub(super) path: String,
    /// True when the file was read.
    pub(super) ok: bool,
    /// What was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) read: Option<vfs::TextRead>,
    /// Why it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
}

/// A generator of portable schemas: subschemas inline, no `$schema` keyword.
pub(super) fn generator(contract: Contract) -> SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    settings.contract = contract;
    settings.into_generator()
}

/// The schema of a tool's arguments.
pub(super) fn input<T: JsonSchema>() -> JsonObject {
    portable(generator(Contract::Deserialize).into_root_schema_for::<T>())
}

/// The schema of a tool's structured content. The fields of the result are typed; a list is
/// typed as a list, and its items are described in one line, not given a schema: a client that
/// validates every result (the Python SDK does, in Python) would otherwise spend more time on
/// a listing than the server spends making it (ADR 0004).
pub(super) fn output<T: JsonSchema>() -> JsonObject {
    let mut schema = portable(generator(Contract::Serialize).into_root_schema_for::<T>());
    schema.remove("$defs");
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for field in properties.values_mut() {
            describe_items(field);
            if let Some(field) = field.as_object_mut() {
                // A count is never negative; validating that costs every result a keyword.
                field.remove("minimum");
            }
        }
    }
    schema
}

/// A list's item schema folded into the list's description: `… Each: `kind` (one of …): …;
/// `name` (string): ….`, or `(strings)`.
pub(super) fn describe_items(schema: &mut Value) {
    let Some(list) = schema.as_object_mut() else { return };
    let Some(Value::Object(items)) = list.remove("items") else { return };
    let what = list.get("description").and_then(Value::as_str).unwrap_or("").trim_end_matches('.').to_owned();
    let described = match items.get("properties") {
        Some(Value::Object(fields)) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, field)| {
                    let kind = match (
                        field.get("type").and_then(Value::as_str),
                        field.get("enum").and_then(Value::as_array),
                    ) {
                        (_, Some(choices)) => {
                            let words: Vec<&str> = choices.iter().filter_map(Value::as_str).collect();
                            format!("one of {}", words.join(", "))
                        }
                        (Some(kind), None) => kind.to_owned(),
                        (None, None) => "object".to_owned(),
                    };
                    let about = field.get("description").and_then(Value::as_str).unwrap_or("").trim_end_matches('.');
                    format!("`{name}` ({kind}): {about}")
                })
                .collect();
            format!("{what}. Each is an object: {}.", fields.join("; "))
        }
        _ => match items.get("type").and_then(Value::as_str) {
            Some(kind) => format!("{what} ({kind}s)."),
            None => format!("{what}."),
        },
    };
    list.insert("description".to_owned(), json!(described));
}

/// `read_text_file`'s structured content: a [`vfs::TextRead`] without the text, which goes
/// once, as text content.
pub(super) fn text_read_output() -> JsonObject {
    let mut schema = output::<vfs::TextRead>();
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.remove("content");
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|name| name != "content");
    }
    schema
}

/// Makes a generated schema portable across MCP clients: an optional argument is one that is
/// not required (no `["integer", "null"]` type arrays, no `anyOf` with `null`), no `format`
/// values beyond the standard ones (`uint64` is Rust's), no Rust type names as titles, and
/// unknown keys allowed (they are ignored, with a note).
pub(super) fn portable(schema: schemars::Schema) -> JsonObject {
    let mut value = schema.to_value();
    clean(&mut value);
    let mut map = match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    // Some clients read `properties` without checking that it is there.
    map.entry("properties").or_insert_with(|| json!({}));
    map
}

pub(super) fn clean(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    for key in ["format", "title", "additionalProperties", "$schema"] {
        map.remove(key);
    }
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    // Doc comments wrap; a description is one line.
    if let Some(Value::String(description)) = map.get_mut("description")
        && description.contains('\n')
    {
        *description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    if let Some(Value::Array(types)) = map.get("type") {
        let kept: Vec<Value> = types.iter().filter(|kind| *kind != "null").cloned().collect();
        let single = if let [kind] = kept.as_slice() { kind.clone() } else { Value::Array(kept) };
        map.insert("type".to_owned(), single);
    }
    for combinator in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = map.get(combinator) else { continue };
        let kept: Vec<Value> =
            branches.iter().filter(|branch| branch.get("type") != Some(&json!("null"))).cloned().collect();
        if let [Value::Object(only)] = kept.as_slice() {
            let only = only.clone();
            map.remove(combinator);
            for (key, value) in only {
                map.entry(key).or_insert(value);
            }
        }
    }
    if let Some(Value::Array(choices)) = map.get_mut("enum") {
        choices.retain(|choice| !choice.is_null());
    }
    // An enum of strings as `enum`, which every client reads, not as `oneOf` of constants.
    if let Some(Value::Array(branches)) = map.get("oneOf")
        && let Some(choices) =
            branches.iter().map(|branch| branch.get("const").cloned()).collect::<Option<Vec<Value>>>()
    {
        map.remove("oneOf");
        map.insert("type".to_owned(), json!("string"));
        map.insert("enum".to_owned(), Value::Array(choices));
    }
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(clean);
        }
    }
    if let Some(items) = map.get_mut("items") {
        clean(items);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = map.get_mut(key) {
            branches.iter_mut().for_each(clean);
        }
    }
}

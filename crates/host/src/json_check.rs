//! What every message from a client passes before anything parses it whole: that it is JSON,
//! and that it holds at most [`MAX_VALUES`] values.
//!
//! A message is bounded in bytes (16 MiB), but not its cost once parsed: a body of 16 MiB of
//! `[],` is five million values, which `serde_json::Value` (and the SDK's message types,
//! parsed more than once) hold in over a gigabyte, and parsing it took seconds of a thread
//! that serves every tenant. The check walks the bytes once without building anything,
//! stops at the first value past the bound, and checks what a parse would refuse too: numbers
//! out of range (`1e999`), strings that are not UTF-8, nesting deeper than `serde_json`'s
//! 128. A tool call's arguments are a few values to a few thousand (`edit_file`'s edits,
//! `read_multiple_files`' paths); content of any size is one string.

use std::cell::Cell;

use serde::Deserialize as _;
use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Most values one message may hold (every number, string, `true`, `false`, `null`, array,
/// object and object key counts one).
pub(crate) const MAX_VALUES: usize = 100_000;

/// What a client is told of a message past [`MAX_VALUES`].
pub(crate) const TOO_MANY_VALUES: &str =
    "invalid request: the message holds more than 100000 JSON values; send fewer items in one request";

/// What [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Checked {
    /// One JSON value, within the bound.
    Json,
    /// Not JSON (or more than one value, or a number or string a parse would refuse), and
    /// what the parser said.
    NotJson(String),
    /// JSON that nests arrays and objects deeper than a parse takes (`serde_json`'s 128,
    /// which every parse of the message applies).
    TooDeep,
    /// JSON, past [`MAX_VALUES`] (it was not read to its end).
    TooManyValues,
}

/// What a client is told of a message nested past `serde_json`'s 128 levels.
pub(crate) const TOO_DEEP: &str =
    "invalid request: the message nests arrays and objects more than 128 deep; send flatter arguments";

/// Checks `bytes` as one message: JSON, and at most [`MAX_VALUES`] values. With the verdict,
/// the message's `id` (a string or an integer at its top), when it was read before anything
/// went wrong, so that a refusal can answer the request it refuses.
pub(crate) fn check(bytes: &[u8]) -> (Checked, Option<Value>) {
    let count = Cell::new(0);
    let id = std::cell::RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let top = Counting { count: &count, role: Role::Top(&id) };
    let read = top.deserialize(&mut deserializer).and_then(|()| deserializer.end());
    let checked = match read {
        Ok(()) => Checked::Json,
        Err(_) if count.get() > MAX_VALUES => Checked::TooManyValues,
        Err(error) if error.to_string().starts_with("recursion limit exceeded") => Checked::TooDeep,
        Err(error) => Checked::NotJson(error.to_string()),
    };
    (checked, id.into_inner())
}

/// Everything a client's message passes before the SDK sees it ([`check`], then
/// [`refusal`]): the refusal to answer instead, if any, with the message's id when it could be
/// read (a client waits on that id).
pub(crate) fn screen(bytes: &[u8]) -> Option<Refusal> {
    let (checked, id) = check(bytes);
    let refused = |code: i32, message: String| Some(Refusal { code, message, id: id.clone() });
    match checked {
        Checked::Json => refusal(bytes),
        Checked::NotJson(why) => refused(-32700, format!("parse error: the message is not valid JSON ({why})")),
        Checked::TooDeep => refused(-32600, TOO_DEEP.to_owned()),
        Checked::TooManyValues => refused(-32600, TOO_MANY_VALUES.to_owned()),
    }
}

/// A message refused before the SDK sees it: the JSON-RPC error to answer, and the id to
/// answer it with (`None`: `null`, when the message has none the client could match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) code: i32,
    pub(crate) message: String,
    pub(crate) id: Option<Value>,
}

/// What a message that passed [`check`] must be besides JSON, and what the SDK would answer
/// without the request's id or without a reason: one JSON-RPC 2.0 message of MCP, an object
/// with `jsonrpc: "2.0"`, a string `method` and a string or integer `id` (a request), no `id`
/// (a notification), or an `id` with `result` or `error` (a response); and a `tools/call`
/// naming its tool, with its arguments an object. `None`: the SDK may have it. Read without
/// copying what the message carries (a `write_file` content of megabytes).
pub(crate) fn refusal(bytes: &[u8]) -> Option<Refusal> {
    #[derive(serde::Deserialize)]
    struct Message {
        #[serde(default)]
        jsonrpc: Option<Value>,
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        method: Option<Value>,
        #[serde(default)]
        params: Option<Params>,
        #[serde(default, deserialize_with = "present")]
        result: bool,
        #[serde(default, deserialize_with = "present")]
        error: bool,
    }
    let refused =
        |code: i32, message: &str, id: Option<Value>| Some(Refusal { code, message: format!("invalid {message}"), id });
    // By its first byte: a struct would be read from an array too, field by field.
    match bytes.iter().find(|byte| !byte.is_ascii_whitespace()) {
        Some(b'{') => {}
        Some(b'[') => {
            return refused(
                -32600,
                "request: this server takes one message at a time, not a batch (an array of messages); send each by itself",
                None,
            );
        }
        _ => return refused(-32600, "request: a message is a JSON object (`jsonrpc`, `id`, `method`, `params`)", None),
    }
    let message = match serde_json::from_slice::<Message>(bytes) {
        Ok(message) => message,
        // Answered with the request's id when it has one, and only one (a `method` given
        // twice leaves it readable).
        Err(error) => return refused(-32600, &format!("request: {error}"), lone_id(bytes)),
    };
    let has_id = message.id.is_some();
    let id = message.id.filter(usable_id);
    if message.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return refused(-32600, "request: `jsonrpc` must be \"2.0\"", id);
    }
    if message.result || message.error {
        // A response to the server's request: never answered, whatever it holds.
        return None;
    }
    let Some(method) = message.method else {
        return refused(
            -32600,
            "request: a message has a `method` (a request or a notification), or an `id` with `result` or `error` (a response)",
            id,
        );
    };
    let Some(method) = method.as_str() else { return refused(-32600, "request: `method` must be a string", id) };
    if id.is_none() && has_id {
        return refused(-32600, "request: `id` must be a string or an integer", None);
    }
    // A notification is never answered, even refused.
    id.as_ref()?;
    let params = match message.params {
        Some(Params { object: false, .. }) => {
            return refused(-32602, "params: `params` must be an object (or left out)", id);
        }
        // The SDK answers these without the request's id, which no client can match.
        Some(Params { twice: Some(key), .. }) => {
            return refused(-32602, &format!("params: `{key}` is given more than once"), id);
        }
        Some(Params { meta: Some(Kind::Other), .. }) => {
            return refused(-32602, "params: `_meta` must be an object (or left out)", id);
        }
        params => params,
    };
    if method != "tools/call" {
        return None;
    }
    match params {
        Some(Params { name: Some(Value::String(_)), arguments: None | Some(Kind::Null | Kind::Object), .. }) => None,
        Some(Params { name: Some(Value::String(_)), .. }) => {
            refused(-32602, "params: `arguments` must be an object of the tool's arguments", id)
        }
        Some(_) => refused(-32602, "params: `name` must name the tool to call (a string; `tools/list` lists them)", id),
        None => refused(
            -32602,
            "params: `tools/call` takes `params` as an object: {\"name\": the tool, \"arguments\": {…}}",
            id,
        ),
    }
}

/// The id of a message that is not one of MCP (a `method` given twice), when it has exactly
/// one that the SDK takes.
fn lone_id(bytes: &[u8]) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct OnlyId {
        #[serde(default)]
        id: Option<Value>,
    }
    serde_json::from_slice::<OnlyId>(bytes).ok()?.id.filter(usable_id)
}

/// True for an id the SDK takes: a string, an integer, or an integer written as a float (`1.0`)
/// within 2^53.
fn usable_id(id: &Value) -> bool {
    match id {
        Value::String(_) => true,
        Value::Number(number) => {
            number.is_i64()
                || number.as_f64().is_some_and(|float| float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0)
        }
        _ => false,
    }
}

/// A field that is there, whatever its value (`null` too).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| true)
}

/// A `params` as far as [`refusal`] looks: whether it is an object, its `name`, and what kind
/// of value its `arguments` are (never copied).
#[derive(Default)]
struct Params {
    object: bool,
    name: Option<Value>,
    arguments: Option<Kind>,
    /// What kind of value `_meta` is, when given.
    meta: Option<Kind>,
    /// A key the SDK reads that is given more than once.
    twice: Option<&'static str>,
}

/// The kind of a JSON value whose content is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Object,
    Other,
}

impl<'de> serde::Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ParamsVisitor)
    }
}

struct ParamsVisitor;

impl<'de> Visitor<'de> for ParamsVisitor {
    type Value = Params;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Params, E> {
        Ok(Params::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Params, E> {
        Ok(Params::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<Params, E> {
        Ok(Params::default())
    }

    fn visit_f64<E>(self, _: f64) -> Result<Params, E> {
        Ok(Params::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<Params, E> {
        Ok(Params::default())
    }

    fn visit_unit<E>(self) -> Result<Params, E> {
        Ok(Params::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Params, A::Error> {
        while items.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Params::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Params, A::Error> {
        let mut params = Params { object: true, ..Params::default() };
        while let Some(key) = entries.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "name" => {
                    let name = Some(entries.next_value()?);
                    if std::mem::replace(&mut params.name, name).is_some() {
                        params.twice.get_or_insert("name");
                    }
                }
                "arguments" => {
                    let kind = Some(entries.next_value::<Kinded>()?.0);
                    if std::mem::replace(&mut params.arguments, kind).is_some() {
                        params.twice.get_or_insert("arguments");
                    }
                }
                "_meta" => {
                    let kind = Some(entries.next_value::<Kinded>()?.0);
                    if std::mem::replace(&mut params.meta, kind).is_some() {
                        params.twice.get_or_insert("_meta");
                    }
                }
                _ => {
                    entries.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(params)
    }
}

/// A value read for its [`Kind`] alone.
struct Kinded(Kind);

impl<'de> serde::Deserialize<'de> for Kinded {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KindVisitor).map(Kinded)
    }
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = Kind;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Kind, E> {
        Ok(Kind::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Kind, E> {
        Ok(Kind::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Kind, E> {
        Ok(Kind::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Kind, E> {
        Ok(Kind::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Kind, E> {
        Ok(Kind::Other)
    }

    fn visit_unit<E>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Kind, A::Error> {
        while items.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Kind::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Kind, A::Error> {
        while entries.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
        Ok(Kind::Object)
    }
}

/// Visits one value, counting it and everything in it into the cell; refused past the bound.
/// At the message's top it also keeps its `id`, when a string or an integer.
#[derive(Clone, Copy)]
struct Counting<'c> {
    count: &'c Cell<usize>,
    role: Role<'c>,
}

/// Where a [`Counting`] visit is, for the id it keeps.
#[derive(Clone, Copy)]
enum Role<'c> {
    /// The message itself: its `id` member goes into the cell.
    Top(&'c std::cell::RefCell<Option<Value>>),
    /// The value of the top's `id`.
    Id(&'c std::cell::RefCell<Option<Value>>),
    /// Anything else.
    Inner,
}

impl Counting<'_> {
    fn inner(self) -> Self {
        Self { role: Role::Inner, ..self }
    }

    /// Keeps `id` when this visit is the top's `id`.
    fn keep(self, id: impl FnOnce() -> Value) {
        if let Role::Id(kept) = self.role {
            *kept.borrow_mut() = Some(id());
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counting<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        let count = self.count.get() + 1;
        self.count.set(count);
        if count > MAX_VALUES {
            return Err(D::Error::custom("too many values"));
        }
        deserializer.deserialize_any(self)
    }
}

/// An object key, counted: true when it is `id`.
struct Key<'c>(&'c Cell<usize>);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        let count = self.0.get() + 1;
        self.0.set(count);
        if count > MAX_VALUES {
            return Err(D::Error::custom("too many values"));
        }
        let key = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(key == "id")
    }
}

impl<'de> Visitor<'de> for Counting<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, id: i64) -> Result<(), E> {
        self.keep(|| Value::from(id));
        Ok(())
    }

    fn visit_u64<E>(self, id: u64) -> Result<(), E> {
        self.keep(|| Value::from(id));
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, id: &str) -> Result<(), E> {
        self.keep(|| Value::from(id));
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        while items.next_element_seed(self.inner())?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
        let Role::Top(id) = self.role else {
            while entries.next_key_seed(self.inner())?.is_some() {
                entries.next_value_seed(self.inner())?;
            }
            return Ok(());
        };
        while let Some(is_id) = entries.next_key_seed(Key(self.count))? {
            let role = if is_id { Role::Id(id) } else { Role::Inner };
            entries.next_value_seed(Counting { role, ..self })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(bytes: &[u8]) -> Checked {
        check(bytes).0
    }

    #[test]
    fn json_within_the_bound_passes_and_what_a_parse_refuses_does_not() {
        assert_eq!(
            verdict(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[1,2.5,true,null,"x"]}}"#),
            Checked::Json
        );
        assert_eq!(verdict(b"  [] \n"), Checked::Json);
        for not_json in [&b"{"[..], b"[1,]", b"1e999", b"\"\xff\"", b"[] []", b"", b"{\"a\" 1}"] {
            assert!(matches!(verdict(not_json), Checked::NotJson(_)), "{}", String::from_utf8_lossy(not_json));
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(verdict(deep.as_bytes()), Checked::TooDeep);
        let within = format!("{}{}", "[".repeat(120), "]".repeat(120));
        assert_eq!(verdict(within.as_bytes()), Checked::Json);
    }

    #[test]
    fn past_the_bound_of_values_a_message_is_too_many_wherever_they_are() {
        // The bound counts the outer array and each item.
        let items = |count: usize| format!("[{}]", vec!["[]"; count].join(","));
        assert_eq!(verdict(items(MAX_VALUES - 1).as_bytes()), Checked::Json);
        assert_eq!(verdict(items(MAX_VALUES).as_bytes()), Checked::TooManyValues);
        let keys =
            format!("{{{}}}", (0..MAX_VALUES / 2).map(|key| format!("\"{key}\":0")).collect::<Vec<_>>().join(","));
        assert_eq!(verdict(keys.as_bytes()), Checked::TooManyValues, "keys count too");
        let hidden = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","junk":{}}}"#, items(MAX_VALUES));
        assert_eq!(check(hidden.as_bytes()), (Checked::TooManyValues, Some(serde_json::json!(1))));
    }

    /// Every refusal answers the request it refuses when its id could be read (a string or an
    /// integer at the top, before what went wrong), says what is wrong and how to mend it, and
    /// lets through what the SDK takes.
    #[test]
    #[expect(clippy::too_many_lines, reason = "one table of cases")]
    fn a_refusal_names_the_request_and_the_fault() {
        let refusal = |text: &str| screen(text.as_bytes()).map(|refusal| (refusal.code, refusal.message, refusal.id));
        let id = |id: serde_json::Value| Some(id);
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"x","arguments":{{"x":{}{}}}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(refusal(&deep), Some((-32600, TOO_DEEP.to_owned(), id(serde_json::json!(1)))));
        let surrogate = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"grep","arguments":{"pattern":"\ud800"}}}"#;
        assert_eq!(
            refusal(surrogate),
            Some((
                -32700,
                "parse error: the message is not valid JSON (unexpected end of hex escape at line 1 column 103)"
                    .to_owned(),
                id(serde_json::json!("a"))
            ))
        );
        // An id after what went wrong is not read: `null`.
        assert_eq!(refusal(r#"{"params":[1,],"id":3}"#).map(|refused| refused.2), Some(None));

        let cases = [
            (
                r#"[{"jsonrpc":"2.0","id":13,"method":"ping"}]"#,
                -32600,
                "invalid request: this server takes one message at a time, not a batch (an array of messages); send each by itself",
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"big","method":"initialize","params":[]}"#,
                -32602,
                "invalid params: `params` must be an object (or left out)",
                Some(serde_json::json!("big")),
            ),
            (
                r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#,
                -32600,
                "invalid request: `id` must be a string or an integer",
                None,
            ),
            ("7", -32600, "invalid request: a message is a JSON object (`jsonrpc`, `id`, `method`, `params`)", None),
            (
                r#"{"jsonrpc":"1.0","id":11,"method":"tools/list"}"#,
                -32600,
                "invalid request: `jsonrpc` must be \"2.0\"",
                Some(serde_json::json!(11)),
            ),
            (
                r#"{"id":12,"method":"tools/list"}"#,
                -32600,
                "invalid request: `jsonrpc` must be \"2.0\"",
                Some(serde_json::json!(12)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                -32600,
                "invalid request: `id` must be a string or an integer",
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                -32600,
                "invalid request: `id` must be a string or an integer",
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":7}"#,
                -32600,
                "invalid request: `method` must be a string",
                Some(serde_json::json!(2)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2}"#,
                -32600,
                "invalid request: a message has a `method` (a request or a notification), or an `id` with `result` or `error` (a response)",
                Some(serde_json::json!(2)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_text_file","arguments":[]}}"#,
                -32602,
                "invalid params: `arguments` must be an object of the tool's arguments",
                Some(serde_json::json!(6)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{}}"#,
                -32602,
                "invalid params: `name` must name the tool to call (a string; `tools/list` lists them)",
                Some(serde_json::json!(8)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":3}}"#,
                -32602,
                "invalid params: `name` must name the tool to call (a string; `tools/list` lists them)",
                Some(serde_json::json!(8)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":9,"method":"tools/call"}"#,
                -32602,
                "invalid params: `tools/call` takes `params` as an object: {\"name\": the tool, \"arguments\": {…}}",
                Some(serde_json::json!(9)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":"x"}"#,
                -32602,
                "invalid params: `params` must be an object (or left out)",
                Some(serde_json::json!(9)),
            ),
            // The SDK answered these without the id (a `_meta` not an object), or as an
            // unknown method `tools/call` (a key twice).
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_mounts","arguments":{},"_meta":5}}"#,
                -32602,
                "invalid params: `_meta` must be an object (or left out)",
                Some(serde_json::json!(2)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":"x"}}"#,
                -32602,
                "invalid params: `_meta` must be an object (or left out)",
                Some(serde_json::json!(7)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_text_file","name":"list_mounts"}}"#,
                -32602,
                "invalid params: `name` is given more than once",
                Some(serde_json::json!(4)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"x","arguments":{},"arguments":{}}}"#,
                -32602,
                "invalid params: `arguments` is given more than once",
                Some(serde_json::json!(10)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/list"}"#,
                -32600,
                "invalid request: duplicate field `method` at line 1 column 48",
                Some(serde_json::json!(3)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}"#,
                -32600,
                "invalid request: duplicate field `id` at line 1 column 28",
                None,
            ),
        ];
        for (text, code, message, answered) in cases {
            assert_eq!(refusal(text), Some((code, message.to_owned(), answered)), "{text}");
        }
        for fine in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"grep","arguments":{"pattern":"x"}}}"#,
            r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"list_mounts","arguments":null}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_mounts","_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":0,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":0,"error":{"code":1,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":-4,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":null}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"ping","params":{"_meta":null}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":[]}"#,
        ] {
            assert_eq!(refusal(fine), None, "{fine}");
        }
    }
}

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

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

/// Most values one message may hold (every number, string, `true`, `false`, `null`, array,
/// object and object key counts one).
pub(crate) const MAX_VALUES: usize = 100_000;

/// What a client is told of a message past [`MAX_VALUES`].
pub(crate) const TOO_MANY_VALUES: &str =
    "invalid request: the message holds more than 100000 JSON values; send fewer items in one request";

/// What [`check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// One JSON value, within the bound.
    Json,
    /// Not JSON (or more than one value, or a number or string a parse would refuse).
    NotJson,
    /// JSON, past [`MAX_VALUES`] (it was not read to its end).
    TooManyValues,
}

/// Checks `bytes` as one message: JSON, and at most [`MAX_VALUES`] values.
pub(crate) fn check(bytes: &[u8]) -> Checked {
    let count = Cell::new(0);
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let read = Counting(&count).deserialize(&mut deserializer).and_then(|()| deserializer.end());
    match read {
        Ok(()) => Checked::Json,
        Err(_) if count.get() > MAX_VALUES => Checked::TooManyValues,
        Err(_) => Checked::NotJson,
    }
}

/// Visits one value, counting it and everything in it into the cell; refused past the bound.
struct Counting<'c>(&'c Cell<usize>);

impl<'de> DeserializeSeed<'de> for Counting<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        let count = self.0.get() + 1;
        self.0.set(count);
        if count > MAX_VALUES {
            return Err(D::Error::custom("too many values"));
        }
        deserializer.deserialize_any(self)
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

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        while items.next_element_seed(Counting(self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
        while entries.next_key_seed(Counting(self.0))?.is_some() {
            entries.next_value_seed(Counting(self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_within_the_bound_passes_and_what_a_parse_refuses_does_not() {
        assert_eq!(
            check(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[1,2.5,true,null,"x"]}}"#),
            Checked::Json
        );
        assert_eq!(check(b"  [] \n"), Checked::Json);
        for not_json in [&b"{"[..], b"[1,]", b"1e999", b"\"\xff\"", b"[] []", b"", b"{\"a\" 1}"] {
            assert_eq!(check(not_json), Checked::NotJson, "{}", String::from_utf8_lossy(not_json));
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(check(deep.as_bytes()), Checked::NotJson);
    }

    #[test]
    fn past_the_bound_of_values_a_message_is_too_many_wherever_they_are() {
        // The bound counts the outer array and each item.
        let items = |count: usize| format!("[{}]", vec!["[]"; count].join(","));
        assert_eq!(check(items(MAX_VALUES - 1).as_bytes()), Checked::Json);
        assert_eq!(check(items(MAX_VALUES).as_bytes()), Checked::TooManyValues);
        let keys =
            format!("{{{}}}", (0..MAX_VALUES / 2).map(|key| format!("\"{key}\":0")).collect::<Vec<_>>().join(","));
        assert_eq!(check(keys.as_bytes()), Checked::TooManyValues, "keys count too");
        let hidden = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","junk":{}}}"#, items(MAX_VALUES));
        assert_eq!(check(hidden.as_bytes()), Checked::TooManyValues);
    }
}

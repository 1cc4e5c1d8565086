//! The daemon's bearer tokens and what each grants: `/mcp`, or one hosted crew's endpoint.
//! Part of the hosted plan, which needs no HTTP server to be made (`crates/host/src/http.rs`
//! checks them on every request). Tokens are compared in constant time and never shown.

/// Who may reach which endpoint: each token grants `/mcp` (`crew` `None`) or one crew's
/// endpoint.
#[derive(Clone, Default)]
pub struct Tokens {
    grants: Vec<(Option<String>, String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        formatter.debug_struct("Tokens").field("count", &self.grants.len()).finish()
    }
}

/// The token that authorized a request, as the daemon knows it: its place in the token list,
/// never its text. Two agents that share a token are one principal (ADR 0005).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Principal(pub(crate) usize);

impl Tokens {
    /// Adds a token for `/mcp` (`crew` `None`) or `/mcp/<crew>`.
    pub fn grant(&mut self, crew: Option<String>, token: String) {
        self.grants.push((crew, token));
    }

    /// True when no token was given.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// True when some token grants another endpoint than `endpoint` (`None`: `/mcp`).
    #[must_use]
    pub fn grants_other_than(&self, endpoint: Option<&str>) -> bool {
        self.grants.iter().any(|(crew, _)| crew.as_deref() != endpoint)
    }

    /// True when some token grants `/mcp`.
    #[must_use]
    pub fn grants_default(&self) -> bool {
        self.grants.iter().any(|(crew, _)| crew.is_none())
    }

    /// The crews that have a token.
    pub fn crews(&self) -> impl Iterator<Item = &str> {
        self.grants.iter().filter_map(|(crew, _)| crew.as_deref())
    }

    /// Each token's endpoint, as a number (the tokens of one endpoint share it), in the
    /// tokens' order, and how many endpoints have a token.
    #[cfg(feature = "mcp")]
    pub(crate) fn endpoints(&self) -> (Vec<usize>, usize) {
        let mut seen: Vec<Option<&str>> = Vec::new();
        let numbers = self
            .grants
            .iter()
            .map(|(crew, _)| {
                let crew = crew.as_deref();
                seen.iter().position(|known| *known == crew).unwrap_or_else(|| {
                    seen.push(crew);
                    seen.len() - 1
                })
            })
            .collect();
        (numbers, seen.len())
    }

    /// The principal `token` is, when it grants the endpoint of `crew`. Every grant is
    /// compared, each in constant time, so the time taken says nothing about which token came
    /// close.
    #[cfg(feature = "mcp")]
    pub(crate) fn principal(&self, crew: Option<&str>, token: &[u8]) -> Option<Principal> {
        let mut found = None;
        for (index, (endpoint, secret)) in self.grants.iter().enumerate() {
            let same = same_secret(secret.as_bytes(), token);
            if same && endpoint.as_deref() == crew && found.is_none() {
                found = Some(Principal(index));
            }
        }
        found
    }
}

/// Compares two secrets without stopping at the first difference.
#[cfg(feature = "mcp")]
fn same_secret(expected: &[u8], given: &[u8]) -> bool {
    let mut difference = expected.len() ^ given.len();
    for index in 0..expected.len().max(given.len()) {
        let left = expected.get(index).copied().unwrap_or(0);
        let right = given.get(index).copied().unwrap_or(0);
        difference |= usize::from(left ^ right);
    }
    std::hint::black_box(difference) == 0
}

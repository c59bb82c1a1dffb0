//! The one SSRF guard for every request disparo makes to a URL a client gave (issue 15,
//! decision D-042): outbound webhooks, media by URL, alternative providers.
//!
//! - [`Guard::check_url`] before any request: an absolute `http(s)` URL without credentials
//!   whose host, when it is a literal address or a `localhost` name, the
//!   [`OutboundPolicy`] permits.
//! - [`Guard::client`]: a `reqwest` client that resolves names through the guard (every
//!   address the name resolves to is checked, and the connection uses only checked
//!   addresses, so a DNS answer cannot change between the check and the connect), follows no
//!   redirect (a 3xx is the answer) and ignores proxy settings from the environment.
//! - [`is_refused`] tells a refused connection from any other failure, for the attempt logs.

use engine::net::{OutboundPolicy, UrlRefusal};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The guard: a policy shared by the clients it builds.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    policy: Arc<OutboundPolicy>,
}

/// A name that resolved only to addresses the policy does not permit.
#[derive(Debug, thiserror::Error)]
#[error("{0} resolve para um endereço privado ou local, que não é permitido")]
pub struct PrivateAddress(String);

struct GuardedResolver {
    policy: Arc<OutboundPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let permitted: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| policy.permits(a.ip()))
                .collect();
            if permitted.is_empty() && !found.is_empty() {
                tracing::warn!(host = %host, "outbound request refused: the name resolves to a private address");
                metrics::counter!("disparo_outbound_refused_total").increment(1);
                return Err(
                    Box::new(PrivateAddress(host)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(permitted.into_iter()) as Addrs)
        })
    }
}

impl Guard {
    /// A guard over `policy`.
    pub fn new(policy: OutboundPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &OutboundPolicy {
        &self.policy
    }

    /// Parses and checks a URL before any request. Errors: [`UrlRefusal::Invalid`] for what is
    /// not an absolute `http`/`https` URL with a host, or one with a user or password;
    /// [`UrlRefusal::PrivateAddress`] for a literal host the policy does not permit.
    pub fn check_url(&self, raw: &str) -> Result<url::Url, UrlRefusal> {
        let url = url::Url::parse(raw.trim())
            .map_err(|_| UrlRefusal::Invalid("a URL deve ser um endereço http(s) completo"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(UrlRefusal::Invalid("a URL deve usar http ou https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlRefusal::Invalid(
                "a URL não pode conter usuário ou senha",
            ));
        }
        let host = url
            .host_str()
            .ok_or(UrlRefusal::Invalid("a URL não tem host"))?;
        self.policy.check_host(host)?;
        Ok(url)
    }

    /// A client builder with the guard's resolver, no redirects and no proxy, and `timeout`
    /// per request (connect at most 5 s of it).
    pub fn client(&self, timeout: Duration) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver {
                policy: self.policy.clone(),
            }))
    }
}

/// Whether a request failed because the guard refused the address its name resolved to.
pub fn is_refused(err: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if e.is::<PrivateAddress>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// The Portuguese sentence of a refusal, for error bodies and attempt logs.
pub fn refusal_message(r: &UrlRefusal) -> String {
    match r {
        UrlRefusal::Invalid(why) => format!("URL inválida: {why}."),
        UrlRefusal::PrivateAddress(host) => format!(
            "O host {host} é um endereço privado, local ou reservado; use uma URL pública (ou libere a sub-rede em DISPARO_ALLOWED_SUBNETS)."
        ),
    }
}

#[cfg(test)]
mod fuzz_tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    proptest! {
        /// Fuzzing (issue 53): the guard's URL check takes any text without a panic, and a
        /// private IPv4 address is refused however the URL writes it (dotted, one decimal
        /// number, hex, octal, IPv4-mapped IPv6): the URL parser's reading is what is checked.
        #[test]
        fn private_addresses_are_refused_in_every_spelling(text in ".{0,80}",
                                                           first in prop::sample::select(vec![10u8, 127, 192, 169, 172, 0]),
                                                           rest in any::<[u8; 3]>(),
                                                           port in proptest::option::of(1u16..)) {
            let guard = Guard::new(OutboundPolicy::default());
            let _ = guard.check_url(&text);
            let _ = guard.check_url(&format!("http://{text}"));
            let ip = match first {
                192 => Ipv4Addr::new(192, 168, rest[1], rest[2]),
                169 => Ipv4Addr::new(169, 254, rest[1], rest[2]),
                172 => Ipv4Addr::new(172, 16 + rest[0] % 16, rest[1], rest[2]),
                f => Ipv4Addr::new(f, rest[0], rest[1], rest[2]),
            };
            let n = u32::from(ip);
            let o = ip.octets();
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            for host in [
                ip.to_string(),
                n.to_string(),
                format!("{n:#x}"),
                format!("0{:o}.0{:o}.0{:o}.0{:o}", o[0], o[1], o[2], o[3]),
                format!("[::ffff:{ip}]"),
                format!("{ip}."),
            ] {
                let url = format!("http://{host}{port}/hook");
                prop_assert!(matches!(guard.check_url(&url), Err(UrlRefusal::PrivateAddress(_))), "{} allowed", url);
            }
        }
    }
}

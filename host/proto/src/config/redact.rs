//! Configuration as pages and event logs may show it.

use std::collections::BTreeMap;

/// What a page shows in place of a value that may be secret.
pub const REDACTED: &str = "*********(redacted)";

/// A configuration as pages and event logs may show it: the value of any key that
/// names a secret, password, token, credential or access key replaced by [`REDACTED`]
/// (as Spark's `spark.redaction.regex`), and a password in a URL's user part cut out.
pub fn redacted(conf: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    conf.iter().map(|(k, v)| (k.clone(), redact(k, v))).collect()
}

fn redact(key: &str, value: &str) -> String {
    let key = key.to_ascii_lowercase();
    let secret =
        ["secret", "password", "passwd", "token", "credential", "accesskey", "access.key", "private"];
    if secret.iter().any(|s| key.contains(s)) {
        return REDACTED.to_owned();
    }
    // scheme://user:password@host → scheme://user:*****@host
    if let Some((scheme, rest)) = value.split_once("://")
        && let Some((userinfo, host)) = rest.split_once('@')
        && let Some((user, _)) = userinfo.split_once(':')
        && !userinfo.contains('/')
    {
        return format!("{scheme}://{user}:{REDACTED}@{host}");
    }
    value.to_owned()
}

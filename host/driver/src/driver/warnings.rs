//! What a job's user may have got wrong though it succeeded: configuration keys it was
//! given and never read.

use std::collections::BTreeSet;

/// The most keys never read a report names one by one: the report travels in one frame,
/// whatever a submission's configuration held.
const UNREAD_NAMED: usize = 16;

/// A warning for each of the job's own keys (not `flint.*`) that none of its calls asked
/// for, with the nearest key they did ask for: `--conf topp=3` for a job that reads
/// `top`. Past [`UNREAD_NAMED`], one more says how many others.
pub(super) fn unread_keys(config: &flint_proto::Conf, asked: &BTreeSet<String>) -> Vec<String> {
    let asked_for: Vec<&str> = asked.iter().map(String::as_str).collect();
    let unread: Vec<&String> =
        config.keys().filter(|key| !key.starts_with("flint.") && !asked.contains(*key)).collect();
    let mut warnings: Vec<String> = unread
        .iter()
        .take(UNREAD_NAMED)
        .map(|key| match flint_proto::config::nearest(key, &asked_for) {
            Some(near) => {
                format!("the job never read the key {key} it was given: did you mean {near}, which it reads?")
            }
            None => format!("the job never read the key {key} it was given"),
        })
        .collect();
    if unread.len() > UNREAD_NAMED {
        warnings.push(format!("… and {} more keys it was given and never read", unread.len() - UNREAD_NAMED));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::unread_keys;

    #[test]
    fn a_key_given_and_never_read_is_named_with_the_one_asked_for() {
        let config = [("topp", "3"), ("points", "10"), ("flint.task.cpus", "1"), ("shape", "x")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        let asked = ["top", "points", "unrelated"].map(str::to_owned).into();
        assert_eq!(
            unread_keys(&config, &asked),
            [
                "the job never read the key shape it was given",
                "the job never read the key topp it was given: did you mean top, which it reads?",
            ]
        );
        let many: flint_proto::Conf = (0..10_000).map(|i| (format!("k{i}"), String::new())).collect();
        let warned = unread_keys(&many, &Default::default());
        assert_eq!(warned.len(), super::UNREAD_NAMED + 1);
        assert_eq!(warned.last().unwrap(), "… and 9984 more keys it was given and never read");
    }
}

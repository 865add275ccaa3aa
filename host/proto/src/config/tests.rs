use super::*;

#[test]
fn every_key_is_in_the_readme() {
    // Whole, or as the last part of a row that names its siblings (`a.b` / `.c`).
    let readme = include_str!("../../../../README.md");
    for key in Settings::KEYS {
        let last = key.rsplit('.').next().unwrap();
        let named = [format!("`{key}`"), format!("`{last}`"), format!("`.{last}`")];
        assert!(named.iter().any(|n| readme.contains(n.as_str())), "README.md does not document {key}");
    }
}

#[test]
fn speculation_is_off_unless_enabled_and_its_values_are_checked() {
    assert_eq!(
        Settings::from_conf(&conf(&[("flint.speculation.multiplier", "2")])).unwrap().speculation,
        None
    );
    let on = Settings::from_conf(&conf(&[
        ("flint.speculation.multiplier", "2"),
        ("flint.speculation.enabled", "true"),
        ("flint.speculation.minTaskRuntime", "1s"),
    ]))
    .unwrap();
    let spec = on.speculation.unwrap();
    assert_eq!((spec.multiplier, spec.quantile, spec.min_task_runtime), (2.0, 0.9, Duration::from_secs(1)));
    for (key, value) in [("flint.speculation.multiplier", "0.5"), ("flint.speculation.quantile", "2")] {
        let error = Settings::from_conf(&conf(&[(key, value)])).unwrap_err().to_string();
        assert!(error.contains(key), "{error}");
    }
}

#[test]
fn secrets_are_redacted_by_key_and_in_urls() {
    let shown = redacted(&conf(&[
        ("flint.security.credentials.vault.command", "vault read --token=abc"),
        ("spark.hadoop.fs.s3a.secret.key", "xyz"),
        ("db_password", "hunter2"),
        ("flint.input.s3.endpoint", "http://admin:pw@127.0.0.1:9000/"),
        ("flint.executor.cores", "2"),
    ]));
    assert_eq!(shown["flint.security.credentials.vault.command"], REDACTED);
    assert_eq!(shown["spark.hadoop.fs.s3a.secret.key"], REDACTED);
    assert_eq!(shown["db_password"], REDACTED);
    assert_eq!(shown["flint.input.s3.endpoint"], format!("http://admin:{REDACTED}@127.0.0.1:9000/"));
    assert_eq!(shown["flint.executor.cores"], "2");
}

fn conf(pairs: &[(&str, &str)]) -> Conf {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn token_providers_are_named_per_service_one_each() {
    let s = Settings::from_conf(&conf(&[
        ("flint.security.credentials.s3.command", "vault read"),
        ("flint.security.credentials.hdfs.file", "/run/token.json"),
        ("flint.security.credentials.renewalRatio", "0.5"),
    ]))
    .unwrap();
    assert_eq!(s.credentials.commands["s3"], "vault read");
    assert_eq!(s.credentials.files["hdfs"], "/run/token.json");
    assert_eq!(s.credentials.renewal_ratio, 0.5);
    let refused = [
        ("flint.security.credentials.s3.script", "x"),
        ("flint.security.credentials..command", "x"),
        ("flint.security.credentials.s 3.command", "x"),
        ("flint.security.credentials.s3.command", " "),
        ("flint.security.credentials.renewalRatio", "1.5"),
        ("flint.security.credentials.retryWait", "0s"),
    ];
    for (k, v) in refused {
        assert!(Settings::from_conf(&conf(&[(k, v)])).is_err(), "{k}={v:?} accepted");
    }
    let both =
        conf(&[("flint.security.credentials.s3.command", "a"), ("flint.security.credentials.s3.file", "/b")]);
    assert!(Settings::from_conf(&both).unwrap_err().to_string().contains("one provider each"));
}

#[test]
fn sizes_and_durations_read_as_spark_writes_them() {
    assert_eq!(parse_size("512m"), Ok(512 << 20));
    assert_eq!(parse_size("4g"), Ok(4 << 30));
    assert_eq!(parse_size("4GiB"), Ok(4 << 30));
    assert_eq!(parse_size("100"), Ok(100));
    assert!(parse_size("lots").is_err());
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
    assert!(parse_duration("soon").is_err());
}

#[test]
fn memory_cap_is_pool_shared_by_slots() {
    let s = Settings::from_conf(&conf(&[
        ("flint.executor.cores", "4"),
        ("flint.executor.memory", "4g"),
        ("flint.task.cpus", "2"),
    ]))
    .unwrap();
    assert_eq!(s.slots(), 2);
    assert_eq!(s.task_memory_pool(), (4u64 << 30) * 6 / 10);
    assert_eq!(s.instance_memory(), s.task_memory_pool() / 2);
}

#[test]
fn job_keys_pass_and_platform_keys_are_checked() {
    assert!(Settings::from_conf(&conf(&[("points", "10")])).is_ok());
    assert_eq!(
        Settings::from_conf(&conf(&[("flint.task.maxFailurez", "3")])),
        Err(ConfError::UnknownKey {
            key: "flint.task.maxFailurez".into(),
            nearest: Some("flint.task.maxFailures")
        })
    );
    let typo = Settings::from_conf(&conf(&[("flint.executor.memroy", "2g")])).unwrap_err();
    assert_eq!(
        typo.to_string(),
        "unknown configuration key flint.executor.memroy: did you mean flint.executor.memory?"
    );
    let far = Settings::from_conf(&conf(&[("flint.nothing.likeIt", "1")])).unwrap_err();
    assert_eq!(far.to_string(), "unknown configuration key flint.nothing.likeIt");
    let err = Settings::from_conf(&conf(&[("flint.executor.memory", "lots")])).unwrap_err();
    assert!(err.to_string().contains("flint.executor.memory"), "{err}");
    assert!(Settings::from_conf(&conf(&[("flint.memory.fraction", "1.5")])).is_err());
    assert!(Settings::from_conf(&conf(&[("flint.driver.maxRunningJobs", "1025")])).is_err());
    assert!(Settings::from_conf(&conf(&[("flint.driver.maxRunningJobs", "0")])).is_err());
    assert_eq!(
        Settings::from_conf(&conf(&[("flint.driver.maxRunningJobs", "1024")])).unwrap().max_running_jobs,
        1024
    );
    assert!(Settings::from_conf(&conf(&[("flint.task.cpus", "3")])).is_err());
    let plain = [("flint.s3.endpoint", "http://127.0.0.1:9000"), ("flint.input.allowHttp", "true")];
    assert!(Settings::from_conf(&conf(&plain)).is_ok(), "plain HTTP when allowed");
    for bad in [
        [("flint.executor.heartbeatInterval", "0s"), ("points", "1")],
        [("flint.network.timeout", "0s"), ("points", "1")],
        [("flint.network.timeout", "5s"), ("flint.executor.heartbeatInterval", "10s")],
        [("flint.task.deadline", "0s"), ("points", "1")],
        [("flint.merge.deadline", "5ms"), ("points", "1")],
        [("flint.network.idleTimeout", "0s"), ("points", "1")],
        [("flint.driver.maxResultSize", "0"), ("points", "1")],
        [("flint.input.roots", "/data,relative/dir"), ("points", "1")],
        [("flint.executor.backend", "yarn"), ("points", "1")],
        [("flint.dynamicAllocation.minExecutors", "5"), ("flint.dynamicAllocation.maxExecutors", "2")],
        [("flint.dynamicAllocation.executorAllocationRatio", "0"), ("points", "1")],
        [("flint.dynamicAllocation.maxStartFailures", "0"), ("points", "1")],
        [("flint.s3.endpoint", "http://127.0.0.1:9000"), ("points", "1")],
    ] {
        let err = Settings::from_conf(&conf(&bad)).unwrap_err().to_string();
        assert!(err.contains(bad[0].0), "{bad:?}: {err}");
    }
    assert_eq!(parse_pair("a=b=c"), Ok(("a".into(), "b=c".into())));
    assert!(parse_pair("novalue").is_err());
}

//! Every `flint.*` key with the value in force when it is not set, as a user reads it
//! (the environment page lists them beside the keys set). A value in parentheses says
//! what happens unset; every other one is exactly what setting it would give, which a
//! test keeps true against [`Settings::default`].

use super::Settings;

impl Settings {
    /// Every key of [`Settings::KEYS`], in its order, with its default.
    pub const DEFAULTS: &'static [(&'static str, &'static str)] = &[
        ("flint.executor.cores", "2"),
        ("flint.executor.memory", "1g"),
        ("flint.memory.fraction", "0.6"),
        ("flint.task.cpus", "1"),
        ("flint.task.maxFailures", "4"),
        ("flint.task.maxExecutorLosses", "4"),
        ("flint.stage.maxConsecutiveAttempts", "4"),
        ("flint.task.deadline", "10m"),
        ("flint.task.maxResultSize", "64m"),
        ("flint.task.combine", "true"),
        ("flint.task.instanceReuse", "100"),
        ("flint.task.maxLogSize", "1m"),
        ("flint.driver.maxResultSize", "1g"),
        ("flint.driver.memory", "2g"),
        ("flint.input.roots", "(none: flint run allows its --input files)"),
        ("flint.output.roots", "(none: flint run allows its --output)"),
        ("flint.local.dir", "(the executor's --work-dir, else the system's temporary folder)"),
        ("flint.reducer.maxSizeInFlight", "48m"),
        ("flint.shuffle.maxDiskSize", "(90% of what the local directories had free at the executor's start)"),
        ("flint.local.dir.minFree", "256m"),
        ("flint.executor.componentCacheSize", "256m"),
        ("flint.driver.retainedJobs", "1000"),
        ("flint.driver.maxRunningJobs", "16"),
        ("flint.driver.maxWaitingJobs", "1000"),
        ("flint.merge.deadline", "10m"),
        ("flint.network.idleTimeout", "3s"),
        ("flint.executor.heartbeatInterval", "10s"),
        ("flint.network.timeout", "120s"),
        ("flint.decommission.timeout", "20s"),
        ("flint.executor.startTimeout", "60s"),
        ("flint.excludeOnFailure.enabled", "false"),
        ("flint.excludeOnFailure.maxFailedTasksPerExecutor", "2"),
        ("flint.speculation.enabled", "false"),
        ("flint.speculation.multiplier", "3"),
        ("flint.speculation.quantile", "0.9"),
        ("flint.speculation.minTaskRuntime", "100ms"),
        ("flint.speculation.interval", "100ms"),
        ("flint.executor.backend", "static"),
        ("flint.master.url", "(none)"),
        ("flint.cores.max", "(no bound)"),
        ("flint.executor.instances", "2"),
        ("flint.dynamicAllocation.enabled", "false"),
        ("flint.dynamicAllocation.minExecutors", "0"),
        ("flint.dynamicAllocation.maxExecutors", "(no bound)"),
        ("flint.dynamicAllocation.initialExecutors", "(the minimum)"),
        ("flint.dynamicAllocation.schedulerBacklogTimeout", "1s"),
        ("flint.dynamicAllocation.sustainedSchedulerBacklogTimeout", "(the schedulerBacklogTimeout)"),
        ("flint.dynamicAllocation.executorIdleTimeout", "60s"),
        ("flint.dynamicAllocation.executorAllocationRatio", "1.0"),
        ("flint.dynamicAllocation.cooldown", "10s"),
        ("flint.dynamicAllocation.maxPendingExecutors", "20"),
        ("flint.dynamicAllocation.maxStartFailures", "5"),
        ("flint.dynamicAllocation.startBackoff", "1s"),
        ("flint.kubernetes.namespace", "(the client configuration's)"),
        ("flint.kubernetes.container.image", "flint:latest"),
        ("flint.kubernetes.container.image.pullPolicy", "IfNotPresent"),
        ("flint.kubernetes.memoryOverheadFactor", "0.1"),
        ("flint.kubernetes.allocation.batch.size", "20"),
        ("flint.kubernetes.allocation.batch.delay", "1s"),
        ("flint.kubernetes.executor.podTemplateFile", "(none)"),
        ("flint.kubernetes.executor.secretName", "(<app>-secret)"),
        ("flint.kubernetes.driver.pod.name", "(none: --driver-pod-name)"),
        ("flint.kubernetes.executor.apiPollingInterval", "30s"),
        ("flint.security.credentials.renewalRatio", "0.75"),
        ("flint.security.credentials.renewalMargin", "10s"),
        ("flint.security.credentials.retryWait", "1s"),
        ("flint.security.credentials.<service>.command", "(none)"),
        ("flint.security.credentials.<service>.file", "(none)"),
        ("flint.security.credentials.flint.lifetime", "1h"),
        ("flint.s3.endpoint", "(AWS)"),
        ("flint.s3.region", "us-east-1"),
        ("flint.input.allowHttp", "false"),
        ("flint.driver.maxUploadSize", "1g"),
        ("flint.driver.maxUploadsHeld", "4g"),
        ("flint.log.level", "info"),
        ("flint.eventLog.dir", "(none: no event log)"),
        ("flint.eventLog.rollSize", "128m"),
    ];
}

#[cfg(test)]
mod tests {
    use super::Settings;

    #[test]
    fn every_key_has_its_default_and_every_value_shown_is_the_default() {
        let keys: Vec<&str> = Settings::DEFAULTS.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, Settings::KEYS);
        // Set to what the page shows, every key gives the settings of none set.
        let shown: super::super::Conf = Settings::DEFAULTS
            .iter()
            .filter(|(_, v)| !v.starts_with('('))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(Settings::from_conf(&shown).unwrap(), Settings::default());
    }
}

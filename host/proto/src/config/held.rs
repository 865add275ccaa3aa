//! Which settings belong to the driver's operator and which a job may set for itself.
//! A submission's `--conf` may tighten the driver's limits (a smaller result budget, a
//! shorter merge deadline) but never loosen them, nor change how the driver and its
//! executors are run, reached or secured.

use super::{ConfError, Settings};
use std::time::Duration;

/// Keys a job sets for its own tasks, within the bounds `Settings::from_conf` keeps.
pub const JOB_KEYS: &[&str] = &[
    "flint.task.maxFailures",
    "flint.task.deadline",
    "flint.task.maxResultSize",
    "flint.task.combine",
    "flint.task.instanceReuse",
    "flint.task.maxLogSize",
];

/// A driver-held setting's value, as compared against what a job asks for.
#[derive(Debug, PartialEq)]
enum Held {
    /// A limit (bytes, a count): a job may ask for less, never more.
    Limit(u64),
    Time(Duration),
    /// Anything else: a job may only repeat it.
    Fixed(String),
}

impl Settings {
    /// The driver-held settings, each under its key. Every key of [`Settings::KEYS`]
    /// is here or in [`JOB_KEYS`] (a test checks it), so a new key has to be placed.
    fn held(&self) -> Vec<(&'static str, Held)> {
        use Held::{Fixed, Limit, Time};
        let fixed = |v: &dyn std::fmt::Debug| Fixed(format!("{v:?}"));
        let d = &self.dynamic_allocation;
        let k = &self.kubernetes;
        let c = &self.credentials;
        vec![
            ("flint.executor.cores", fixed(&self.executor_cores)),
            ("flint.executor.memory", fixed(&self.executor_memory)),
            ("flint.memory.fraction", fixed(&self.memory_fraction)),
            ("flint.task.cpus", fixed(&self.task_cpus)),
            // 0 (never) is the loosest: a job may not ask for it on a driver that bounds.
            (
                "flint.task.maxExecutorLosses",
                Limit(match self.task_max_executor_losses {
                    0 => u64::MAX,
                    n => n.into(),
                }),
            ),
            ("flint.stage.maxConsecutiveAttempts", Limit(self.stage_max_consecutive_attempts.into())),
            ("flint.driver.maxResultSize", Limit(self.driver_max_result_size)),
            ("flint.driver.memory", fixed(&self.driver_memory)),
            ("flint.input.roots", fixed(&self.input_roots)),
            ("flint.output.roots", fixed(&self.output_roots)),
            ("flint.local.dir", fixed(&self.local_dirs)),
            ("flint.reducer.maxSizeInFlight", fixed(&self.reducer_max_size_in_flight)),
            ("flint.shuffle.maxDiskSize", fixed(&self.shuffle_max_disk_size)),
            ("flint.local.dir.minFree", fixed(&self.local_dir_min_free)),
            ("flint.executor.componentCacheSize", fixed(&self.component_cache_size)),
            ("flint.driver.retainedJobs", fixed(&self.retained_jobs)),
            ("flint.driver.maxRunningJobs", fixed(&self.max_running_jobs)),
            ("flint.driver.maxWaitingJobs", fixed(&self.max_waiting_jobs)),
            ("flint.merge.deadline", Time(self.merge_deadline)),
            ("flint.network.idleTimeout", fixed(&self.network_idle_timeout)),
            ("flint.executor.heartbeatInterval", fixed(&self.heartbeat_interval)),
            ("flint.network.timeout", fixed(&self.network_timeout)),
            ("flint.decommission.timeout", fixed(&self.decommission_timeout)),
            ("flint.executor.startTimeout", fixed(&self.executor_start_timeout)),
            ("flint.excludeOnFailure.enabled", fixed(&self.exclude_on_failure)),
            ("flint.excludeOnFailure.maxFailedTasksPerExecutor", fixed(&self.max_failed_tasks_per_executor)),
            // A job refuses copies in its manifest (`speculation = false`), not here.
            ("flint.speculation.enabled", fixed(&self.speculation)),
            ("flint.speculation.multiplier", fixed(&self.speculation)),
            ("flint.speculation.quantile", fixed(&self.speculation)),
            ("flint.speculation.minTaskRuntime", fixed(&self.speculation)),
            ("flint.speculation.interval", fixed(&self.speculation)),
            ("flint.executor.backend", fixed(&self.executor_backend)),
            ("flint.master.url", fixed(&self.master_url)),
            ("flint.cores.max", fixed(&self.cores_max)),
            ("flint.executor.instances", fixed(&self.executor_instances)),
            ("flint.dynamicAllocation.enabled", fixed(&d.enabled)),
            ("flint.dynamicAllocation.minExecutors", fixed(&d.min_executors)),
            ("flint.dynamicAllocation.maxExecutors", fixed(&d.max_executors)),
            ("flint.dynamicAllocation.initialExecutors", fixed(&d.initial_executors)),
            ("flint.dynamicAllocation.schedulerBacklogTimeout", fixed(&d.backlog_timeout)),
            ("flint.dynamicAllocation.sustainedSchedulerBacklogTimeout", fixed(&d.sustained_backlog_timeout)),
            ("flint.dynamicAllocation.executorIdleTimeout", fixed(&d.idle_timeout)),
            ("flint.dynamicAllocation.executorAllocationRatio", fixed(&d.ratio)),
            ("flint.dynamicAllocation.cooldown", fixed(&d.cooldown)),
            ("flint.dynamicAllocation.maxPendingExecutors", fixed(&d.max_pending)),
            ("flint.dynamicAllocation.maxStartFailures", fixed(&d.max_start_failures)),
            ("flint.dynamicAllocation.startBackoff", fixed(&d.start_backoff)),
            ("flint.kubernetes.namespace", fixed(&k.namespace)),
            ("flint.kubernetes.container.image", fixed(&k.image)),
            ("flint.kubernetes.container.image.pullPolicy", fixed(&k.image_pull_policy)),
            ("flint.kubernetes.memoryOverheadFactor", fixed(&k.memory_overhead_factor)),
            ("flint.kubernetes.allocation.batch.size", fixed(&k.batch_size)),
            ("flint.kubernetes.allocation.batch.delay", fixed(&k.batch_delay)),
            ("flint.kubernetes.executor.podTemplateFile", fixed(&k.pod_template_file)),
            ("flint.kubernetes.executor.secretName", fixed(&k.secret_name)),
            ("flint.kubernetes.driver.pod.name", fixed(&k.driver_pod_name)),
            ("flint.kubernetes.executor.apiPollingInterval", fixed(&k.api_polling_interval)),
            ("flint.security.credentials.renewalRatio", fixed(&c.renewal_ratio)),
            ("flint.security.credentials.renewalMargin", fixed(&c.renewal_margin)),
            ("flint.security.credentials.retryWait", fixed(&c.retry_wait)),
            ("flint.security.credentials.<service>.command", fixed(&c.commands)),
            ("flint.security.credentials.<service>.file", fixed(&c.files)),
            ("flint.security.credentials.flint.lifetime", fixed(&c.flint_lifetime)),
            ("flint.s3.endpoint", fixed(&self.objects.s3_endpoint)),
            ("flint.s3.region", fixed(&self.objects.s3_region)),
            ("flint.input.allowHttp", fixed(&self.objects.allow_http)),
            ("flint.driver.maxUploadSize", Limit(self.driver_max_upload_size)),
            ("flint.driver.maxUploadsHeld", Limit(self.driver_max_uploads_held)),
            ("flint.log.level", fixed(&self.executor_log_level)),
            ("flint.eventLog.dir", fixed(&self.event_log_dir)),
            ("flint.eventLog.rollSize", fixed(&self.event_log_roll_size)),
        ]
    }

    /// Checks a job's settings (the driver's configuration with the job's over it)
    /// against the driver's own: the job may lower a driver-held limit, and may not
    /// change any other driver-held key. The error names the first key it changed.
    pub fn within_driver(&self, driver: &Settings) -> Result<(), ConfError> {
        for ((key, asked), (_, set)) in self.held().into_iter().zip(driver.held()) {
            let allowed = match (&asked, &set) {
                (Held::Limit(a), Held::Limit(s)) => a <= s,
                (Held::Time(a), Held::Time(s)) => a <= s,
                (a, s) => a == s,
            };
            if !allowed {
                let shown = |h: &Held| match h {
                    Held::Limit(n) => n.to_string(),
                    Held::Time(d) => format!("{} ms", d.as_millis()),
                    Held::Fixed(v) => v.clone(),
                };
                let reason = match set {
                    Held::Fixed(_) => format!("is set on the driver ({}), not by a job", shown(&set)),
                    _ => format!("is a limit the driver sets ({}); a job may only lower it", shown(&set)),
                };
                return Err(ConfError::Invalid { key: key.into(), value: shown(&asked), reason });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Conf;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let conf: Conf = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_conf(&conf).unwrap()
    }

    #[test]
    fn every_key_is_held_by_the_driver_or_set_by_jobs() {
        let held: Vec<&str> = Settings::default().held().into_iter().map(|(k, _)| k).collect();
        for key in Settings::KEYS {
            let placed = held.contains(key) as u8 + JOB_KEYS.contains(key) as u8;
            assert_eq!(placed, 1, "{key} must be either driver-held or a job key, once");
        }
        assert_eq!(held.len() + JOB_KEYS.len(), Settings::KEYS.len());
    }

    #[test]
    fn a_job_may_lower_the_drivers_limits_but_not_raise_or_change_them() {
        let driver = settings(&[("flint.driver.maxResultSize", "256m"), ("flint.merge.deadline", "1m")]);
        let lower = settings(&[("flint.driver.maxResultSize", "16m"), ("flint.merge.deadline", "5s")]);
        assert!(lower.within_driver(&driver).is_ok());
        let same = settings(&[
            ("flint.driver.maxResultSize", "256m"),
            ("flint.merge.deadline", "1m"),
            ("flint.task.deadline", "1h"),
        ]);
        assert!(same.within_driver(&driver).is_ok(), "repeating a value or setting a job key is fine");

        let raised = settings(&[("flint.driver.maxResultSize", "512m"), ("flint.merge.deadline", "1m")]);
        let err = raised.within_driver(&driver).unwrap_err().to_string();
        assert!(err.contains("flint.driver.maxResultSize") && err.contains("only lower"), "{err}");
        let longer = settings(&[("flint.driver.maxResultSize", "256m"), ("flint.merge.deadline", "2m")]);
        assert!(longer.within_driver(&driver).unwrap_err().to_string().contains("flint.merge.deadline"));

        for (key, value) in [
            ("flint.input.allowHttp", "true"),
            ("flint.s3.endpoint", "https://169.254.169.254"),
            ("flint.network.timeout", "1h"),
            ("flint.security.credentials.s3.command", "cat /etc/shadow"),
            ("flint.executor.memory", "100g"),
        ] {
            let err = settings(&[(key, value)]).within_driver(&Settings::default()).unwrap_err();
            let key_named = if key.contains(".s3.command") {
                "flint.security.credentials.<service>.command"
            } else {
                key
            };
            assert!(err.to_string().contains(key_named), "{key}: {err}");
        }
    }
}

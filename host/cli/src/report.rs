//! Printing a job's outcome: a readable summary, or one JSON object for scripts.

use flint_proto::{JobError, JobReport, TaskFailure};
use serde_json::{Value, json};

/// The job's output as JSON when it is JSON, else as a string.
fn result_value(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// A failure as `{"kind": "trap", "message": …}`: serde's external tag made a field.
fn failure_json(failure: &TaskFailure) -> Value {
    match serde_json::to_value(failure).expect("a failure encodes") {
        Value::Object(map) if map.len() == 1 => {
            let (_, fields) = map.into_iter().next().expect("one entry");
            let mut flat = match fields {
                Value::Object(fields) => fields,
                _ => serde_json::Map::new(),
            };
            flat.insert("kind".into(), Value::String(failure.kind().to_owned()));
            Value::Object(flat)
        }
        other => other,
    }
}

pub fn json(report: &JobReport) -> Value {
    let mut out = json_fields(report);
    if let Ok(bytes) = &report.outcome {
        out["result"] = result_value(bytes);
    }
    out
}

/// All [`json()`] says but a succeeded job's result.
fn json_fields(report: &JobReport) -> Value {
    let mut out = json!({
        "job": report.name,
        "job_id": report.job,
        "status": match &report.outcome {
            Ok(_) => "succeeded",
            Err(JobError::Cancelled(_)) => "cancelled",
            Err(_) => "failed",
        },
        "tasks": report.tasks,
        "attempts": report.attempts,
        "maps_rerun": report.maps_rerun,
        "speculative_attempts": report.speculative,
        "speculative_won": report.speculative_won,
        "outputs_handed_over": report.outputs_handed_over,
        "task_failures": report.failures.iter().map(|f| json!({
            "task": f.task,
            "attempt": f.attempt,
            "executor": f.executor,
            "failure": failure_json(&f.failure),
            "log_tail": f.log_tail,
        })).collect::<Vec<_>>(),
        "task_failures_dropped": report.failures_dropped,
        "elapsed_ms": report.elapsed.as_secs_f64() * 1e3,
    });
    if let Some(shuffle) = &report.shuffle {
        out["shuffle"] = serde_json::to_value(shuffle).expect("sizes encode");
    }
    out["stages"] = serde_json::to_value(&report.stages).expect("stages encode");
    out["warnings"] = serde_json::to_value(&report.warnings).expect("warnings encode");
    match &report.outcome {
        Ok(_) => {}
        Err(e) => {
            out["result"] = Value::Null;
            out["error"] = Value::String(format!("job {} failed: {e}", report.name));
            out["failure"] = match e {
                JobError::TaskFailed { index, failure, .. } => {
                    json!({ "task": index, "reason": failure_json(failure) })
                }
                JobError::Cancelled(reason) => {
                    json!({ "reason": { "kind": "cancelled", "message": reason } })
                }
                JobError::NoExecutors(reason) => {
                    json!({ "reason": { "kind": "no-executors", "message": reason } })
                }
                JobError::Merge(f) | JobError::Finish(f) => json!({ "reason": failure_json(f) }),
                JobError::Program(f) => json!({ "program": true, "reason": failure_json(f) }),
                JobError::ResultTooLarge { size, limit } => {
                    json!({ "reason": { "kind": "result-too-large", "size": size, "limit": limit, "key": "flint.driver.maxResultSize" } })
                }
                JobError::ExecutorsLost { index, losses, last } => json!({ "task": index, "reason": {
                    "kind": "executors-lost", "losses": losses, "last": last, "key": "flint.task.maxExecutorLosses" } }),
                JobError::Nondeterministic { map } => {
                    json!({ "task": map, "reason": { "kind": "nondeterministic-map", "map": map } })
                }
                JobError::Shuffle(message) => json!({ "reason": { "kind": "shuffle", "message": message } }),
                JobError::StageFailed { stage, attempts, last } => json!({ "stage": stage, "reason": {
                    "kind": "stage-failed", "attempts": attempts, "last": last, "key": "flint.stage.maxConsecutiveAttempts" } }),
                JobError::Output(message) => json!({ "reason": { "kind": "output", "message": message } }),
            };
        }
    }
    out
}

/// What a succeeded job's summary says before its result.
fn succeeded(report: &JobReport) -> String {
    let mut text = format!(
        "job {} succeeded in {:.2} s: {} tasks, {} attempts, {} failed attempts\n",
        report.name,
        report.elapsed.as_secs_f64(),
        report.tasks,
        report.attempts,
        report.failures.len() + report.failures_dropped as usize
    );
    if report.outputs_handed_over > 0 {
        text.push_str(&format!(
            "{} map outputs were handed over by executors that left, and did not run again\n",
            report.outputs_handed_over
        ));
    }
    if report.speculative > 0 {
        text.push_str(&format!(
            "{} straggling tasks got a speculative copy; {} of the copies finished first\n",
            report.speculative, report.speculative_won
        ));
    }
    if report.stages.len() > 1 {
        for s in &report.stages {
            text.push_str(&stage_line(s));
        }
    }
    if report.maps_rerun > 0 {
        text.push_str(&format!(
            "{} map tasks ran again: their outputs were lost with an executor or could not be read\n",
            report.maps_rerun
        ));
    }
    if let Some(sh) = report.shuffle.filter(|sh| sh.skewed > 0) {
        text.push_str(&format!(
            "skew: {} of {} reduce partitions hold over {}× the median ({} bytes) and 256 MiB; \
             the largest, partition {}, holds {} bytes\n",
            sh.skewed,
            sh.partitions,
            flint_proto::SKEW_FACTOR,
            sh.median,
            sh.largest_partition,
            sh.largest
        ));
    }
    text
}

/// One stage of a job of several, as its summary says it.
fn stage_line(s: &flint_proto::StageReport) -> String {
    let mut line = format!("stage {}", s.id);
    let reads: Vec<String> = s.parents.iter().map(u32::to_string).collect();
    match (s.kind, reads.is_empty()) {
        (flint_proto::StageKind::Shuffle, true) => line.push_str(" (shuffle)"),
        (flint_proto::StageKind::Shuffle, false) => {
            line.push_str(&format!(" (shuffle, reads {})", reads.join(", ")))
        }
        (flint_proto::StageKind::Result, true) => line.push_str(" (result)"),
        (flint_proto::StageKind::Result, false) => {
            line.push_str(&format!(" (result, reads {})", reads.join(", ")))
        }
    }
    line.push_str(&format!(": {} tasks, {} attempts", s.tasks, s.attempts));
    if s.shuffle_read_bytes > 0 {
        line.push_str(&format!(", read {} shuffle bytes", s.shuffle_read_bytes));
    }
    if s.shuffle_write_bytes > 0 {
        line.push_str(&format!(", wrote {} shuffle bytes", s.shuffle_write_bytes));
    }
    if s.rerun_tasks > 0 {
        line.push_str(&format!(", {} tasks ran again", s.rerun_tasks));
    }
    if s.skipped {
        line.push_str(", skipped: its outputs were there");
    }
    line.push('\n');
    line
}

pub fn human(report: &JobReport) -> String {
    let secs = report.elapsed.as_secs_f64();
    let mut text = String::new();
    match &report.outcome {
        Ok(bytes) => {
            text.push_str(&succeeded(report));
            render(&result_value(bytes), 0, &mut text);
            text.push('\n');
        }
        Err(e) => {
            text.push_str(&format!("error: job {} failed after {secs:.2} s: {e}\n", report.name));
            if let Some(last) = report.failures.last() {
                if let TaskFailure::Trap { backtrace: Some(bt), .. } = &last.failure {
                    text.push_str(&format!("guest backtrace of task {}:\n{}\n", last.task, bt.trim_end()));
                }
                if !last.log_tail.trim().is_empty() {
                    text.push_str(&format!(
                        "task {} output (last lines):\n{}\n",
                        last.task,
                        last.log_tail.trim_end()
                    ));
                }
            }
        }
    }
    text
}

/// Prints the report (JSON on stdout, or a summary: the result on stdout, a failure on
/// stderr) and returns the exit code. A job's collected parts (`--collect`) go to
/// stdout as they are, its summary to stderr.
pub fn print(report: &JobReport, as_json: bool, parts: bool) -> u8 {
    use std::io::Write;
    // A reader that went away (`| head`) ends the printing, not the process.
    let _ = if as_json {
        write_json(report, std::io::stdout().lock())
    } else if let (true, Ok(bytes)) = (parts, &report.outcome) {
        std::io::stdout().write_all(bytes).and_then(|()| write!(std::io::stderr(), "{}", succeeded(report)))
    } else if report.outcome.is_ok() {
        write!(std::io::stdout(), "{}", human(report))
    } else {
        write!(std::io::stderr(), "{}", human(report))
    };
    // On stderr whatever the form, so that they never mix with a result read by a script.
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    match &report.outcome {
        Ok(_) => 0,
        Err(JobError::Cancelled(_)) => crate::exit::CANCELLED,
        Err(_) => crate::exit::JOB_FAILED,
    }
}

/// Writes [`json()`]'s report as one line. A result that is JSON on one line already is
/// checked and written as it came, after the other fields: decoding it into values and
/// encoding them again took most of the time `flint submit --json` spent on a 200 MB
/// result.
fn write_json(report: &JobReport, out: impl std::io::Write) -> std::io::Result<()> {
    use serde::ser::{SerializeMap, Serializer};
    use serde_json::value::RawValue;
    use std::io::Write;
    let raw = match &report.outcome {
        Ok(bytes) if !bytes.contains(&b'\n') => serde_json::from_slice::<&RawValue>(bytes).ok(),
        _ => None,
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    if let Some(result) = raw
        && let Value::Object(fields) = json_fields(report)
    {
        let mut writer = serde_json::Serializer::new(&mut out);
        let mut map = writer.serialize_map(Some(fields.len() + 1))?;
        for (key, value) in &fields {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("result", result)?;
        map.end()?;
    } else {
        serde_json::to_writer(&mut out, &json(report))?;
    }
    out.write_all(b"\n")?;
    out.flush()
}

/// Pretty JSON, but with arrays of plain values (a `["word", 12]` pair, say) on one line.
fn render(value: &Value, indent: usize, out: &mut String) {
    let pad = |n: usize| "  ".repeat(n);
    match value {
        Value::Array(items) if items.iter().any(|v| v.is_array() || v.is_object()) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                render(item, indent + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            for (i, (key, item)) in map.iter().enumerate() {
                out.push_str(&format!("{}{}: ", pad(indent + 1), Value::String(key.clone())));
                render(item, indent + 1, out);
                out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(outcome: Result<Vec<u8>, JobError>) -> JobReport {
        JobReport {
            job: flint_proto::JobId(7),
            name: "words".into(),
            outcome,
            tasks: 2,
            attempts: 3,
            maps_rerun: 0,
            outputs_handed_over: 0,
            failures: Vec::new(),
            failures_dropped: 0,
            elapsed: std::time::Duration::from_millis(1500),
            shuffle: None,
            speculative: 0,
            speculative_won: 0,
            stages: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn written(report: &JobReport) -> String {
        let mut out = Vec::new();
        write_json(report, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_report_is_one_json_line_whatever_its_result_holds() {
        let results: [&[u8]; 5] =
            [br#"[["a",1],{"b":"\u00e9\n"}]"#, b"[1,\n 2]", b"{\"cut", b"\xff plain", b"  42 "];
        for result in results {
            let report = report(Ok(result.to_vec()));
            let line = written(&report);
            assert_eq!(line.matches('\n').count(), 1, "{line}");
            assert!(line.ends_with('\n'));
            let read: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(read, json(&report), "{line}");
        }
        let failed = report(Err(JobError::Cancelled("asked".into())));
        let read: Value = serde_json::from_str(&written(&failed)).unwrap();
        assert_eq!(read, json(&failed));
        assert_eq!(read["status"], "cancelled");
    }
}

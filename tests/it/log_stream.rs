//! A large log is streamed: memory stays bounded whatever the size, an endless line
//! included. (Its own test binary, so that the peak memory of the children this process
//! waited for is the instrument process's alone.)

use std::io::Write;
use std::process::{Command, Stdio};

const NOISE: &str =
    "node0:41003:41053 [3] NCCL INFO Channel 07/32 :    0   1   2   3   4   5   6   7\n";
const STEP: &str = "[rank=3 pp=0] Step4 i=0: 0.11 GiB | alloc=0.11 cached=1.89 non-pt=1.75\n";

/// Waits for `child` and returns its output with its own peak RSS, read from its
/// `/proc/PID/status` (`VmHWM`, the high-water mark of the memory it mapped after its exec) until
/// it exits. Not `getrusage`/`wait4`: the tests share one large process, whose high-water mark
/// a spawned child inherits in its `maxrss` at its exec.
fn wait_with_peak_rss(child: std::process::Child) -> (std::process::Output, i64) {
    let status = format!("/proc/{}/status", child.id());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(text) = std::fs::read_to_string(&status) else {
                    break;
                };
                let Some(kib) = text
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
                else {
                    break; // exited: a zombie has no memory left
                };
                peak = peak.max(kib * 1024);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            peak
        })
    };
    let output = child.wait_with_output().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (output, watcher.join().unwrap())
}

#[test]
fn a_quarter_gigabyte_through_a_pipe_in_bounded_memory() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(["log", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let block: String = NOISE.repeat(1000);
        let mut written = 0usize;
        let mut lines = 0u64;
        // 64 MiB of one line without an end (binary garbage), then noise with a print
        // now and then, to 256 MiB.
        let garbage = vec![0xAAu8; 1 << 20];
        for _ in 0..64 {
            stdin.write_all(&garbage).unwrap();
            written += garbage.len();
        }
        stdin.write_all(b"\n").unwrap();
        lines += 1;
        let mut prints = 0u64;
        while written < 256 << 20 {
            stdin.write_all(block.as_bytes()).unwrap();
            written += block.len();
            lines += 1000;
            if prints < 3 {
                stdin
                    .write_all(STEP.replace("i=0", &format!("i={prints}")).as_bytes())
                    .unwrap();
                prints += 1;
                lines += 1;
            }
        }
        (lines, prints)
    });
    let (out, peak) = wait_with_peak_rss(child);
    let (lines, prints) = writer.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["totals"]["lines"], lines);
    assert_eq!(r["totals"]["prints"], prints);
    assert_eq!(r["inputs"][0]["overlong_lines"], 1);
    assert!(
        peak > 0 && peak < 48 << 20,
        "peak RSS {} MiB for 256 MiB of input",
        peak >> 20
    );
}

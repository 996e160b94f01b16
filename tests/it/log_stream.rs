//! A large log is streamed: memory stays bounded whatever the size, an endless line
//! included. (Its own test binary, so that the peak memory of the children this process
//! waited for is the instrument process's alone.)

use std::io::Write;
use std::process::{Command, Stdio};

const NOISE: &str =
    "node0:41003:41053 [3] NCCL INFO Channel 07/32 :    0   1   2   3   4   5   6   7\n";
const STEP: &str = "[rank=3 pp=0] Step4 i=0: 0.11 GiB | alloc=0.11 cached=1.89 non-pt=1.75\n";

/// Waits for `child` and returns its output with its own peak RSS (`wait4` for its pid: the
/// tests share one process, so the children's `getrusage` would mix in every other test's).
fn wait_with_peak_rss(mut child: std::process::Child) -> (std::process::Output, i64) {
    use std::io::Read;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).unwrap();
        v
    });
    let mut stderr = Vec::new();
    err.read_to_end(&mut stderr).unwrap();
    let stdout = reader.join().unwrap();
    let mut status: libc::c_int = 0;
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut u) };
    assert_eq!(got, pid, "wait4");
    use std::os::unix::process::ExitStatusExt;
    let output = std::process::Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout,
        stderr,
    };
    (output, u.ru_maxrss * 1024)
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

//! fio from the shell.

use super::*;

#[test]
fn shell_runs_fio() {
    let mut os = MockOs::new();
    let out = shell(&mut os, "fio --name=s --size=64k --bs=16k --rw=read");
    assert!(out.ends_with("\nok\n"), "{out}");
    assert!(out.starts_with("s: (g=0): rw=read, bs=16384B, ioengine=psync, iodepth=1\n"));
    // The mock knows no cache mode; its directory is up.
    assert!(out.contains("err= 0: node=1, mode=unknown\n"), "{out}");
    assert!(out.contains("  busy: 2 instances, 1 vCPU each (node 1 + directory)\n"));
    assert!(out.contains("  cache: not dropped (not supported in this mode)\n"));
    let line = out.lines().find(|l| l.starts_with("RESULT ")).unwrap();
    let v = jsonck::parse(&line[7..]).expect("valid");
    assert_eq!(v.get("read").get("ios").u64(), 4);
    assert_eq!(os.file("/s.0.0").map(<[u8]>::len), Some(65_536));
    // Writes through the shell too, into a directory.
    shell(&mut os, "mkdir /d");
    let out = shell(
        &mut os,
        "fio --rw=write --size=32k --numjobs=2 --directory=/d --fsync=2",
    );
    assert!(out.ends_with("\nok\n"), "{out}");
    assert!(os.file("/d/job.1.0").is_some());
}

#[test]
fn shell_reports_fio_errors() {
    let mut os = MockOs::new();
    assert_eq!(
        shell(&mut os, "fio --size=1m --foo"),
        "error: fio: unrecognized option '--foo'\n"
    );
    assert_eq!(
        shell(&mut os, "fio --size=1m --bs=x"),
        "error: fio: bad value 'x' for option 'bs' (a multiple of 512 from 512 to 16m)\n"
    );
    assert_eq!(
        shell(&mut os, "fio"),
        "error: usage: fio [--output-format=F] --OPT=VALUE ... | JOBFILE\n"
    );
    // The shell mock cannot seek: random I/O is refused after layout.
    assert_eq!(
        shell(&mut os, "fio --size=16k --rw=randread"),
        "error: fio: rw=randread needs positioned I/O (seek), not supported in this mode\n"
    );
    assert_eq!(
        shell(&mut os, "fio --size=16k --ioengine=mmap"),
        "error: fio: ioengine=mmap not supported in this mode\n"
    );
    // Nothing was created by the rejected option lines.
    assert!(os.paths.iter().all(|p| p == "/job.0.0"));
    // Quoted words reach fio without their quotes.
    let out = shell(&mut os, "fio \"--name=a b\" --size=4k");
    assert!(out.starts_with("a b: (g=0)"), "{out}");
    assert!(os.file("/a b.0.0").is_some());
}

#[test]
fn default_run_env() {
    let mut os = MockOs::new();
    let (node, mode, busy) = crate::os::CacheControl::run_env(&mut os);
    assert_eq!((node, mode.as_str(), busy), (1, "unknown", 2));
    os.cluster.nodes[0].state = "down".to_string();
    assert_eq!(RunEnv::from_os(&mut os).busy_instances, 1);
    let mut f = FakeOs::new();
    f.mode = Some("onecopy".to_string());
    assert_eq!(
        RunEnv::from_os(&mut f),
        RunEnv {
            node: 3,
            mode: "onecopy".to_string(),
            busy_instances: 2,
            vcpus_per_instance: 1
        }
    );
}

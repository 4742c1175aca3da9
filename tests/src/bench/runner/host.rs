//! The host figures: ping-pong and the page directory's code.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::bench::model::{Figure, Status, GROUP_HOST};
use crate::bench::parse;
use crate::run_with_timeout;

impl Runner {
    pub(super) fn host_pingpong(&mut self) {
        let p = self.params.clone();
        let bin = find_pingpong();
        let mut fig = Figure::new(
            GROUP_HOST,
            "host",
            "ping-pong",
            None,
            "median",
            "round trip (median of medians)",
            "ns",
            true,
        );
        fig.context.cluster = "host".into();
        fig.command = format!("{} {}", bin.display(), p.pingpong_rounds);
        fig.params = json!({"rounds": p.pingpong_rounds, "repeats": p.pingpong_repeats});
        fig.busy_instances = Some(0);
        let mut medians = Vec::new();
        let mut lines = Vec::new();
        let mut err = None;
        for _ in 0..p.pingpong_repeats {
            let mut cmd = Command::new(&bin);
            cmd.arg(p.pingpong_rounds.to_string());
            match run_with_timeout(cmd, Duration::from_secs(120)) {
                Ok(o) if o.code == Some(0) => {
                    let text: Vec<String> = o.stdout_text().lines().map(str::to_string).collect();
                    match parse::summary(&text, "host ping-pong") {
                        Ok(s) => medians.push(s.median),
                        Err(e) => err = Some(e),
                    }
                    lines.extend(text);
                }
                Ok(o) => err = Some(format!("exit {:?}: {}", o.code, one_line(&o.text()))),
                Err(e) => err = Some(e.to_string()),
            }
        }
        fig.raw = json!(lines);
        fig.status = match (parse::median(&medians), err) {
            (Some(m), _) if medians.len() == p.pingpong_repeats as usize => Status::Ok(m),
            (_, Some(e)) => Status::Failed(format!("{}: {e}", bin.display())),
            _ => Status::Failed("no ping-pong result".into()),
        };
        self.push(fig);
    }

    /// `pagedir-bench`: the page directory's code on the host, one figure
    /// per operation and per `bench dir` batch size (all from one run).
    pub(super) fn host_pagedir(&mut self) {
        let bin = find_tool("pagedir-bench");
        let rounds = if self.opts.quick { 3 } else { 20 };
        let mut cmd = Command::new(&bin);
        cmd.args(["--rounds", &rounds.to_string()]);
        let command = format!("{} --rounds {rounds}", bin.display());
        let out = match run_with_timeout(cmd, Duration::from_secs(300)) {
            Ok(o) if o.code == Some(0) => {
                let text: Vec<String> = o.stdout_text().lines().map(str::to_string).collect();
                parse::fio_result(&text).map(|v| (v, text))
            }
            Ok(o) => Err(format!("exit {:?}: {}", o.code, one_line(&o.text()))),
            Err(e) => Err(format!("{}: {e}", bin.display())),
        };
        for (sc, pointer) in host_dir_figures() {
            let mut fig = Figure::new(
                GROUP_HOST,
                "host",
                HOST_DIR_BENCH,
                None,
                &sc,
                "page directory operations per second (host, same code)",
                "ops/s",
                false,
            );
            fig.context.cluster = "host".into();
            fig.command = command.clone();
            fig.busy_instances = Some(0);
            fig.status = match &out {
                Ok((v, text)) => {
                    fig.params = json!({
                        "pages": v["pages"], "rounds": v["rounds"], "profile": v["profile"],
                        "bytes_per_entry": v["bytes_per_entry"]
                    });
                    fig.raw = json!(text);
                    match parse::json_num(v, &pointer) {
                        Ok(x) => Status::Ok(x),
                        Err(e) => Status::Failed(e),
                    }
                }
                Err(e) => Status::Failed(e.clone()),
            };
            self.push(fig);
        }
    }
}

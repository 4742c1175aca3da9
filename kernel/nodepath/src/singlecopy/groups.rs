//! Task groups of the single-copy cache (`app`/`fio --group`, `cache
//! groups`, `cache policy NAME --group G`, `cache config group=G ...`):
//! their settings kept here across rejoins and applied to every new
//! cache, the group of the tasks running, and the reclaim a group over
//! its limit needs.

use alloc::vec::Vec;

use fabric::proto::Errno;

use super::{ScState, BATCH};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::NodeCache;
use crate::policy::{GroupConf, GroupError, GroupInfo, Groups, Target, DEFAULT_NAME};

/// A group error as the shell's OS interface reports it.
pub fn group_errno(e: GroupError) -> Errno {
    match e {
        GroupError::BadName => Errno::Invalid,
        GroupError::Full => Errno::NoSpace,
    }
}

impl ScState {
    /// Re-create the groups (same ids: same order) and the task group in
    /// a new cache.
    pub(super) fn apply_groups(&self, c: &mut NodeCache) {
        for conf in &self.groups {
            if let Err(e) = c.configure_group(conf) {
                log::warn!("group {}: {e:?}", conf.name);
            }
        }
        c.set_group(self.task_group);
    }

    /// Every group with its pages and counters (`cache groups`); before
    /// the first join, the settings with nothing charged.
    pub fn groups(&self) -> Vec<GroupInfo> {
        match self.coh.as_ref() {
            Some(c) => c.cache.groups(),
            None => self.scratch().info(),
        }
    }

    /// The settings as a cache without pages would hold them.
    fn scratch(&self) -> Groups {
        let mut g = Groups::new(self.controls.policy);
        for conf in &self.groups {
            let _ = g.configure(conf);
        }
        g
    }

    /// Make or change a group. `default`'s policy is the node's (`cache
    /// policy`); its limit is a group limit like any other.
    pub fn configure_group(&mut self, conf: &GroupConf) -> Result<(), GroupError> {
        let mut conf = conf.clone();
        if conf.name == DEFAULT_NAME {
            if let Some(p) = conf.policy.take() {
                let mut k = self.controls;
                k.policy = p;
                self.set_controls(k);
            }
        }
        // Checked on a copy first: an error changes nothing.
        let mut scratch = self.scratch();
        scratch.configure(&conf)?;
        if let Some(c) = self.coh.as_mut() {
            c.cache.configure_group(&conf)?;
            self.groups = c.cache.group_confs();
        } else {
            self.groups = scratch.confs();
        }
        Ok(())
    }

    /// The tasks doing I/O from now on are in group `name` (made if
    /// missing).
    pub fn enter_group(&mut self, name: &str) -> Result<(), GroupError> {
        let mut scratch = self.scratch();
        let g = scratch.ensure(name)?;
        if let Some(c) = self.coh.as_mut() {
            c.cache.ensure_group(name)?;
            c.cache.set_group(g);
        }
        self.groups = scratch.confs();
        self.task_group = g;
        Ok(())
    }

    /// Invalidate pages of groups over their limits (a limit lowered at
    /// run time): each group's own policy picks. Returns the pages.
    pub(super) fn reclaim_groups<E: Env>(&mut self, link: &mut Link<E>) -> Result<usize, Errno> {
        let mut done = 0;
        loop {
            let over = self
                .cache()
                .and_then(|c| c.over_group_limits().first().copied());
            let Some((g, n)) = over else {
                break;
            };
            let victims = self
                .cache()
                .map(|c| c.pick_victims_in(Target::Group(g), n.min(BATCH)))
                .unwrap_or_default();
            if victims.is_empty() {
                break;
            }
            done += self.invalidate_victims(link, victims)?;
        }
        Ok(done)
    }
}

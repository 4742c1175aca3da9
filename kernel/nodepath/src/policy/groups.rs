//! Task groups, the cgroup analogue (cache_ext's
//! per-cgroup policies, seed 004): every owned page is charged to the
//! group of the task that brought it in, and each group may have its own
//! eviction policy and page limit, so a scan next to a key-value store
//! cannot flush it.
//!
//! Group 0 (`default`) is the node's: tasks started without `--group`
//! are in it, and its policy is the node's (`cache policy NAME`). A group
//! with neither a policy nor a limit of its own keeps its pages in the
//! default group's lists (charged to it, ordered by the node's policy
//! with every other such group's pages: with no group configured the
//! cache behaves exactly as before groups). Giving a group a policy or a
//! limit gives it lists of its own (an [`Evictor`]; its pages move there),
//! run by its policy (the node's if only a limit was set).
//!
//! Reclaim: a miss of a group at its limit evicts from that group, through
//! its policy ([`Groups::at_limit`], [`Target::Group`]); reclaim for the
//! node (its pool or its `limit=`, [`Target::Node`]) takes from every set
//! of lists in proportion to its size, so with one set it is the reclaim
//! of before.
//!
//! A policy hook sees `Folio::group` = the task's group, or 0 when the
//! task is in the group owning the lists (GET-SCAN: a group's own tasks
//! are its GETs, other groups' tasks scans).

use crate::keymap::{KeyMap, KeySet};
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use fabric::proto::PageKey;

use super::{Evictor, PolicyName, PolicyStats};

/// A group's number (its place in the table; 0 is `default`).
pub type GroupId = u32;
/// The node's group.
pub const DEFAULT_GROUP: GroupId = 0;
/// Is `s` a usable group name: 1..=32 of `A-Z a-z 0-9 _ - .`?
pub use osapi::cache::valid_group_name as valid_name;
/// Its name.
pub use osapi::cache::DEFAULT_GROUP_NAME as DEFAULT_NAME;
/// Most groups on a node, `default` included (groups are never removed).
pub use osapi::cache::MAX_GROUPS;
/// Longest group name.
pub use osapi::cache::MAX_GROUP_NAME as MAX_NAME;
/// Most pages filled and not yet read that are remembered so that the
/// read the fill was for does not count as a hit (a fill nobody reads
/// stays until the set is full; then the set starts over).
const MAX_FRESH: usize = 4096;

/// Why a group could not be made or found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupError {
    /// The name is not `A-Z a-z 0-9 _ - .`, 1 to 32 long.
    BadName,
    /// [`MAX_GROUPS`] exist already.
    Full,
}

/// A group's counters (`cache groups`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Page accesses by the group's tasks served without a miss.
    pub hits: u64,
    /// Misses the group's tasks sent.
    pub misses: u64,
    /// Pages charged to the group that were evicted (reclaim, TTL).
    pub evictions: u64,
}

/// A group's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConf {
    /// Its name.
    pub name: String,
    /// Its own policy (`None`: the node's).
    pub policy: Option<PolicyName>,
    /// Most pages charged to it, misses in flight included (`None`: no
    /// limit of its own).
    pub limit: Option<usize>,
}

impl GroupConf {
    /// A group with nothing of its own.
    pub fn named(name: &str) -> GroupConf {
        GroupConf {
            name: name.to_string(),
            policy: None,
            limit: None,
        }
    }
}

/// What `cache groups` shows of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// Settings.
    pub conf: GroupConf,
    /// The policy ordering its pages.
    pub policy: PolicyName,
    /// It has lists of its own (otherwise its pages are in `default`'s).
    pub own_lists: bool,
    /// Pages charged to it.
    pub pages: usize,
    /// Counters.
    pub stats: GroupStats,
}

/// Where reclaim takes pages from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The node needs frames: every set of lists, by size.
    Node,
    /// This group is at its limit: its own lists.
    Group(GroupId),
}

#[derive(Debug)]
struct Group {
    conf: GroupConf,
    /// Own lists (always for `default`; for another group once it has a
    /// policy or a limit).
    lists: Option<Evictor>,
    pages: usize,
    inflight: usize,
    stats: GroupStats,
}

/// Every group of one cache, and which group each owned page is charged
/// to.
#[derive(Debug)]
pub struct Groups {
    groups: Vec<Group>,
    charged: KeyMap<GroupId>,
    pending: KeyMap<GroupId>,
    fresh: KeySet,
    current: GroupId,
    now: u64,
}

impl Groups {
    /// Only `default`, run by `policy`.
    pub fn new(policy: PolicyName) -> Groups {
        Groups {
            groups: alloc::vec![Group {
                conf: GroupConf::named(DEFAULT_NAME),
                lists: Some(Evictor::new(policy)),
                pages: 0,
                inflight: 0,
                stats: GroupStats::default(),
            }],
            charged: KeyMap::default(),
            pending: KeyMap::default(),
            fresh: KeySet::default(),
            current: DEFAULT_GROUP,
            now: 0,
        }
    }

    fn default_lists(&self) -> &Evictor {
        self.groups[0].lists.as_ref().expect("default has lists")
    }

    /// The node's policy (`default`'s).
    pub fn name(&self) -> PolicyName {
        self.default_lists().name()
    }

    /// Switch the node's policy: `default` and every group with a limit
    /// but no policy of its own follow.
    pub fn set_policy(&mut self, name: PolicyName) {
        for g in &mut self.groups {
            let follows = g.conf.policy.is_none();
            if let (true, Some(ev)) = (follows, g.lists.as_mut()) {
                if ev.name() != name {
                    ev.set_policy(name);
                }
            }
        }
    }

    /// The group named `name`.
    pub fn find(&self, name: &str) -> Option<GroupId> {
        (self.groups.iter().position(|g| g.conf.name == name)).map(|i| i as GroupId)
    }

    /// The group named `name`, made (with nothing of its own) if missing.
    pub fn ensure(&mut self, name: &str) -> Result<GroupId, GroupError> {
        if let Some(g) = self.find(name) {
            return Ok(g);
        }
        if !valid_name(name) {
            return Err(GroupError::BadName);
        }
        if self.groups.len() >= MAX_GROUPS {
            return Err(GroupError::Full);
        }
        self.groups.push(Group {
            conf: GroupConf::named(name),
            lists: None,
            pages: 0,
            inflight: 0,
            stats: GroupStats::default(),
        });
        Ok((self.groups.len() - 1) as GroupId)
    }

    /// Make or change a group (`cache policy NAME --group G`, `cache
    /// config group=G ...`). A policy or a limit gives it lists of its
    /// own, and its pages move there. `default`'s policy is the node's;
    /// its limit is the group limit like any other.
    pub fn configure(&mut self, conf: &GroupConf) -> Result<GroupId, GroupError> {
        let g = self.ensure(&conf.name)?;
        let node = self.name();
        let gi = g as usize;
        self.groups[gi].conf.policy = if g == DEFAULT_GROUP {
            None
        } else {
            conf.policy
        };
        self.groups[gi].conf.limit = conf.limit;
        if g == DEFAULT_GROUP {
            if let Some(p) = conf.policy {
                self.set_policy(p);
            }
            return Ok(g);
        }
        if conf.policy.is_none() && conf.limit.is_none() {
            // Lists once given stay (they follow the node's policy).
            if let Some(ev) = self.groups[gi].lists.as_mut() {
                if ev.name() != node {
                    ev.set_policy(node);
                }
            }
            return Ok(g);
        }
        let p = conf.policy.unwrap_or(node);
        if let Some(ev) = self.groups[gi].lists.as_mut() {
            if ev.name() != p {
                ev.set_policy(p);
            }
            return Ok(g);
        }
        let mut ev = Evictor::new(p);
        ev.set_clock(self.now);
        // Its pages leave default's lists for its own, in order.
        let keys: Vec<PageKey> = (self.default_lists().lists().all_keys().into_iter())
            .filter(|k| self.charged.get(k) == Some(&g))
            .collect();
        let def = self.groups[0].lists.as_mut().expect("default has lists");
        for k in keys {
            let (sharers, atime) = (def.lists().sharers(&k), def.lists().atime(&k));
            def.removed(&k);
            ev.adopt(k, sharers, atime.unwrap_or(self.now));
        }
        self.groups[gi].lists = Some(ev);
        Ok(g)
    }

    /// Every group, in id order.
    pub fn info(&self) -> Vec<GroupInfo> {
        let node = self.name();
        (self.groups.iter())
            .map(|g| GroupInfo {
                conf: g.conf.clone(),
                policy: g.lists.as_ref().map_or(node, |e| e.name()),
                own_lists: g.lists.is_some(),
                pages: g.pages,
                stats: g.stats,
            })
            .collect()
    }

    /// Settings of every group (kept across a rejoin).
    pub fn confs(&self) -> Vec<GroupConf> {
        self.groups.iter().map(|g| g.conf.clone()).collect()
    }

    /// The group of the task doing the next accesses and misses (an
    /// unknown id is `default`).
    pub fn set_current(&mut self, g: GroupId) {
        self.current = if (g as usize) < self.groups.len() {
            g
        } else {
            DEFAULT_GROUP
        };
    }

    /// The current group.
    pub fn current(&self) -> GroupId {
        self.current
    }

    /// The clock (ns) stamped on the next accesses.
    pub fn set_clock(&mut self, now: u64) {
        self.now = now;
    }

    /// The policy counters of every set of lists, added up.
    pub fn stats(&self) -> PolicyStats {
        let mut s = PolicyStats::default();
        for e in self.groups.iter().filter_map(|g| g.lists.as_ref()) {
            let x = e.stats();
            s.proposed += x.proposed;
            s.refused += x.refused;
            s.fallbacks += x.fallbacks;
            s.sharer_reports += x.sharer_reports;
        }
        s
    }

    /// Pages charged (in some list).
    pub fn len(&self) -> usize {
        self.charged.len()
    }

    /// None charged.
    pub fn is_empty(&self) -> bool {
        self.charged.is_empty()
    }

    /// Is `key` charged?
    pub fn contains(&self, key: &PageKey) -> bool {
        self.charged.contains_key(key)
    }

    /// The group `key` is charged to.
    pub fn group_of(&self, key: &PageKey) -> Option<GroupId> {
        self.charged.get(key).copied()
    }

    /// Every page in every list (for checks).
    pub fn all_keys(&self) -> Vec<PageKey> {
        (self.groups.iter().filter_map(|g| g.lists.as_ref()))
            .flat_map(|e| e.lists().all_keys())
            .collect()
    }

    /// Pages in every list (for checks: equals [`Groups::len`]).
    pub fn listed(&self) -> usize {
        (self.groups.iter().filter_map(|g| g.lists.as_ref()))
            .map(|e| e.len())
            .sum()
    }

    /// The sharer count of `key` as last reported.
    pub fn sharers_of(&self, key: &PageKey) -> u32 {
        self.lists_of_page(key).map_or(0, |d| {
            self.groups[d as usize]
                .lists
                .as_ref()
                .map_or(0, |e| e.lists().sharers(key))
        })
    }

    /// The group whose lists hold `g`'s pages.
    fn home(&self, g: GroupId) -> GroupId {
        match self.groups.get(g as usize) {
            Some(x) if x.lists.is_some() => g,
            _ => DEFAULT_GROUP,
        }
    }

    fn lists_of_page(&self, key: &PageKey) -> Option<GroupId> {
        self.charged.get(key).map(|g| self.home(*g))
    }

    /// The lists of `home`, ready for a hook call by the current task.
    fn ev(&mut self, home: GroupId) -> &mut Evictor {
        let task = if self.current == home {
            0
        } else {
            self.current
        };
        let now = self.now;
        let ev = self.groups[home as usize]
            .lists
            .as_mut()
            .expect("a home group has lists");
        ev.set_group(task);
        ev.set_clock(now);
        ev
    }

    /// A miss of `key` by the current group went out.
    pub fn miss_started(&mut self, key: PageKey) {
        let g = self.current;
        self.pending.insert(key, g);
        let x = &mut self.groups[g as usize];
        x.inflight += 1;
        x.stats.misses += 1;
    }

    /// The miss of `key` ended (answered or given up): the group it was
    /// for.
    pub fn miss_ended(&mut self, key: &PageKey) -> GroupId {
        let g = self.pending.remove(key).unwrap_or(self.current);
        let x = &mut self.groups[g as usize];
        x.inflight = x.inflight.saturating_sub(1);
        g
    }

    /// The miss of `key` installed it here (ours or mapped): the access it
    /// was for is not a hit.
    pub fn filled(&mut self, key: PageKey) {
        if self.fresh.len() >= MAX_FRESH {
            self.fresh.clear();
        }
        self.fresh.insert(key);
    }

    /// The current task found `key` usable here: a hit, unless this is
    /// the access its fill was for.
    pub fn found(&mut self, key: &PageKey) {
        if !self.fresh.remove(key) {
            self.groups[self.current as usize].stats.hits += 1;
        }
    }

    /// `key` became ours, charged to the current group.
    pub fn added(&mut self, key: PageKey) {
        self.added_for(key, self.current);
    }

    /// `key` became ours, charged to `g` (the group whose miss filled it).
    pub fn added_for(&mut self, key: PageKey, g: GroupId) {
        if self.charged.contains_key(&key) {
            return;
        }
        let g = if (g as usize) < self.groups.len() {
            g
        } else {
            DEFAULT_GROUP
        };
        let saved = self.current;
        self.current = g;
        let home = self.home(g);
        self.ev(home).added(key);
        self.current = saved;
        self.charged.insert(key, g);
        self.groups[g as usize].pages += 1;
    }

    /// `key` was read or written here by the current task.
    pub fn accessed(&mut self, key: PageKey) {
        if let Some(home) = self.lists_of_page(&key) {
            self.ev(home).accessed(key);
        }
    }

    /// The directory reports `n` nodes mapping our `key`.
    pub fn sharers(&mut self, key: PageKey, n: u32, grew: bool) {
        if let Some(home) = self.lists_of_page(&key) {
            self.ev(home).sharers(key, n, grew);
        }
    }

    /// `key` was evicted (counted for its group; [`Groups::removed`]
    /// follows).
    pub fn evicted(&mut self, key: &PageKey) {
        if let Some(g) = self.charged.get(key) {
            self.groups[*g as usize].stats.evictions += 1;
        }
    }

    /// `key` is no longer ours (or no longer evictable).
    pub fn removed(&mut self, key: &PageKey) {
        self.fresh.remove(key);
        let Some(g) = self.charged.remove(key) else {
            return;
        };
        let home = self.home(g);
        self.ev(home).removed(key);
        let x = &mut self.groups[g as usize];
        x.pages = x.pages.saturating_sub(1);
    }

    /// Forget every page (settings and counters stay).
    pub fn reset(&mut self) {
        for g in &mut self.groups {
            if let Some(e) = g.lists.as_mut() {
                e.reset();
            }
            g.pages = 0;
            g.inflight = 0;
        }
        self.charged.clear();
        self.pending.clear();
        self.fresh.clear();
    }

    /// Is the current group at its limit (a miss must reclaim from it
    /// first)?
    pub fn at_limit(&self) -> bool {
        let g = &self.groups[self.current as usize];
        g.conf.limit.is_some_and(|l| g.pages + g.inflight >= l)
    }

    /// Groups over their limits, with how many pages too many.
    pub fn over_limits(&self) -> Vec<(GroupId, usize)> {
        (self.groups.iter().enumerate())
            .filter_map(|(i, g)| {
                let over = g
                    .conf
                    .limit
                    .map_or(0, |l| (g.pages + g.inflight).saturating_sub(l));
                (over > 0).then_some((i as GroupId, over))
            })
            .collect()
    }

    /// One `evict_folios` round for up to `n` candidates from `target`.
    /// For the node, every set of lists proposes its share of `n`, in
    /// proportion to its size (largest remainders first).
    pub fn propose(&mut self, target: Target, n: usize) -> Vec<PageKey> {
        match target {
            Target::Group(g) => {
                let home = self.home(g);
                self.ev(home).propose(n)
            }
            Target::Node => {
                let mut out = Vec::new();
                for (home, share) in self.shares(n) {
                    out.extend(self.ev(home).propose(share));
                }
                out
            }
        }
    }

    /// `n` split over the sets of lists by size.
    fn shares(&self, n: usize) -> Vec<(GroupId, usize)> {
        let sizes: Vec<(GroupId, usize)> = (self.groups.iter().enumerate())
            .filter_map(|(i, g)| g.lists.as_ref().map(|e| (i as GroupId, e.len())))
            .filter(|(_, len)| *len > 0)
            .collect();
        let total: usize = sizes.iter().map(|(_, l)| l).sum();
        if total == 0 {
            return Vec::new();
        }
        let n = n.min(total);
        let mut out: Vec<(GroupId, usize, usize)> = (sizes.iter())
            .map(|&(g, len)| {
                let exact = n as u128 * len as u128;
                let share = (exact / total as u128) as usize;
                (g, share, (exact % total as u128) as usize)
            })
            .collect();
        let mut left = n - out.iter().map(|x| x.1).sum::<usize>();
        let mut order: Vec<usize> = (0..out.len()).collect();
        order.sort_by(|a, b| out[*b].2.cmp(&out[*a].2).then(a.cmp(b)));
        for i in order {
            if left == 0 {
                break;
            }
            out[i].1 += 1;
            left -= 1;
        }
        (out.into_iter())
            .filter(|x| x.1 > 0)
            .map(|(g, s, _)| (g, s))
            .collect()
    }

    /// The cache refused candidate `key`: it goes to the tail of its list.
    pub fn refused(&mut self, key: &PageKey) {
        if let Some(home) = self.lists_of_page(key) {
            self.ev(home).refused(key);
        }
    }

    /// The policies proposed nothing usable: up to `n` pages of `target`
    /// that `ok` accepts, in list order.
    pub fn fallback(
        &mut self,
        target: Target,
        n: usize,
        ok: impl Fn(&PageKey) -> bool,
    ) -> Vec<PageKey> {
        let homes: Vec<GroupId> = match target {
            Target::Group(g) => alloc::vec![self.home(g)],
            Target::Node => (0..self.groups.len() as GroupId)
                .filter(|g| self.groups[*g as usize].lists.is_some())
                .collect(),
        };
        let mut out = Vec::new();
        for h in homes {
            if out.len() >= n {
                break;
            }
            let want = n - out.len();
            let ev = self.ev(h);
            out.extend(ev.fallback(want, &ok));
        }
        out
    }

    /// Pages whose last access is more than `ttl` ns before `now`.
    pub fn expired(&self, now: u64, ttl: u64) -> Vec<PageKey> {
        (self.groups.iter().filter_map(|g| g.lists.as_ref()))
            .flat_map(|e| e.expired(now, ttl))
            .collect()
    }
}

#[cfg(test)]
mod tests;

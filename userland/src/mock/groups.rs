//! [`MockOs`]'s task groups (`cache groups`, `cache config group=`), made
//! by the kernel's rules.

use alloc::string::ToString;
use alloc::vec::Vec;

use super::MockOs;
use crate::os::{
    valid_group_name, CacheGroup, Errno, GroupSettings, PolicyName, DEFAULT_GROUP_NAME, MAX_GROUPS,
};

/// A group with nothing of its own, as the kernel makes it.
pub(super) fn mock_group(name: &str) -> CacheGroup {
    CacheGroup {
        settings: GroupSettings {
            name: name.to_string(),
            policy: None,
            limit: None,
        },
        policy: PolicyName::default(),
        own_lists: name == DEFAULT_GROUP_NAME,
        pages: 0,
        hits: 0,
        misses: 0,
        evictions: 0,
    }
}

impl MockOs {
    pub(super) fn mock_cache_groups(&mut self) -> Result<Vec<CacheGroup>, Errno> {
        let node = self.controls.ok_or(Errno::NotSupported)?.policy;
        Ok((self.groups.iter().cloned())
            .map(|mut g| {
                g.policy = g.settings.policy.unwrap_or(node);
                g
            })
            .collect())
    }

    pub(super) fn mock_set_cache_group(&mut self, settings: &GroupSettings) -> Result<(), Errno> {
        let mut s = settings.clone();
        if s.name == DEFAULT_GROUP_NAME {
            if let (Some(p), Some(k)) = (s.policy.take(), self.controls.as_mut()) {
                k.policy = p;
            }
        }
        let g = self.mock_ensure_group(&s.name)?;
        g.own_lists |= s.policy.is_some() || s.limit.is_some();
        g.settings = s;
        Ok(())
    }

    pub(super) fn mock_set_task_group(&mut self, name: &str) -> Result<(), Errno> {
        self.mock_ensure_group(name)?;
        self.task_groups.push(name.to_string());
        Ok(())
    }

    /// The group named `name`, made if missing (the kernel's rules).
    fn mock_ensure_group(&mut self, name: &str) -> Result<&mut CacheGroup, Errno> {
        self.controls.ok_or(Errno::NotSupported)?;
        let at = match self.groups.iter().position(|g| g.settings.name == name) {
            Some(i) => i,
            None if !valid_group_name(name) => return Err(Errno::Invalid),
            None if self.groups.len() >= MAX_GROUPS => return Err(Errno::NoSpace),
            None => {
                self.groups.push(mock_group(name));
                self.groups.len() - 1
            }
        };
        Ok(&mut self.groups[at])
    }
}

"""``pinlab.policy``: what an administrator sets -- RLIMIT_MEMLOCK accounting, the cgroup v2
tree with the dmem controller and page_counter protection, and opt-in proposals that were never
merged upstream (design.md, policy-semantics.md)."""

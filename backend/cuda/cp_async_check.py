#!/usr/bin/env python3
"""cp_async_check.py: a design check of the cp.async group counting in attn_decode_v2.cu and
attn_prefill_tc.cu, runnable without a GPU: `python3 backend/cuda/cp_async_check.py`. It replays,
per thread, the kernels' order of copies, commits, waits and reads (PTX: cp.async.wait_group N
returns once at most N of the thread's most recent committed groups are pending) and asserts
that every read finds the group it wants, complete, and that no copy targets a slot whose last
copy is still pending or whose data was not yet read. Decode v2: a lane's ring of DV2_STAGES
slots, DV2_STAGES - 1 groups ahead, pass 1 (K), the V prologue issued after it, pass 3 (V), keys
visible or not at random. Prefill: two stages, one group per tile (empty past the last), wait 1,
then a block barrier, the stage refilled one tile after its reads. It mirrors the kernels' code:
change both together; a wrong wait depth or look-ahead fails it."""
import random

def decode(iters, vis, S=4, ahead=None, depth=None):
    ahead = S - 1 if ahead is None else ahead
    depth = S - 1 if depth is None else depth
    groups, done, slot = [], 0, {}
    def issue(ps, it):
        if it < iters and vis(ps, it):
            st = it % S
            if st in slot:
                g = slot[st]
                assert g[2] < done, ("refill of a slot still in flight", ps, it, g)
                assert g[3], ("refill of a slot not yet read", ps, it, g)
            slot[st] = [ps, it, len(groups), False]
        groups.append((ps, it))            # one commit per call, empty or not
    def wait():
        nonlocal done
        done = max(done, len(groups) - depth)
    def read(ps, it):
        g = slot.get(it % S)
        assert g and g[0] == ps and g[1] == it and g[2] < done, ("read before the group landed", ps, it, g, done)
        g[3] = True
    for i in range(ahead): issue(0, i)
    for it in range(iters):
        issue(0, it + ahead); wait()
        if vis(0, it): read(0, it)
    for i in range(ahead): issue(1, i)     # the V prologue, in flight during the softmax pass
    for it in range(iters):
        issue(1, it + ahead); wait()
        if vis(1, it): read(1, it)

def prefill(tiles):
    # groups are per thread but every thread issues the same sequence; the barrier after the wait
    # makes all threads' completed groups visible, so one sequence models the block.
    groups, done, stage_of = [], 0, {}
    def issue(tile, st):
        if st in stage_of:
            g = stage_of[st]
            assert g[1] < done and g[2], ("refill of a stage in flight or unread", tile, g)
        stage_of[st] = [tile, len(groups), False]
    issue(0, 0); groups.append(0)
    st = 0
    for i in range(tiles):
        if i + 1 < tiles: issue(i + 1, st ^ 1)
        groups.append(i + 1)               # always one commit per tile
        done = max(done, len(groups) - 1)  # wait_group 1, then __syncthreads
        g = stage_of[st]
        assert g[0] == i and g[1] < done, ("tile read before it landed", i, g)
        g[2] = True                        # read by every warp, then the closing barrier
        st ^= 1

random.seed(7)
for trial in range(20000):
    iters, p, m = random.randint(0, 40), random.random(), {}
    def vis(ps, it):
        if it not in m: m[it] = random.random() < p
        return m[it]
    decode(iters, vis)
for tiles in range(1, 70): prefill(tiles)
# The check itself must catch the errors it is for.
for bad in ({"depth": 4}, {"ahead": 4}):
    try:
        decode(12, lambda ps, it: True, **bad)
    except AssertionError: continue
    raise SystemExit("the check missed a wrong %s" % bad)
print("cp.async group counting holds: decode v2 (20000 random splits and masks), prefill (1-69 tiles)")

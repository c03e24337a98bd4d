/* kv_collective.c: collectives as serving engines run them: latency plus bytes over bandwidth
 * for each algorithm (one-shot and two-shot custom all-reduce, NCCL ring and tree with its three
 * protocols), chosen by message size as the engines and NCCL choose. Also the all-to-all and
 * point-to-point transfers later issues use (expert parallelism, KV transfer).
 * docs/cost-model.md, "Collectives", derives each formula; docs/sources.md names the figures. */
#include "kv_model.h"

#include <math.h>

/* NCCL's tuning model (src/graph/tuning.cc): base latency per protocol for ring and tree, and
 * the per-step hop latency of each protocol relative to its low-latency (LL) protocol over
 * NVLink (0.6, 1.9, 3.4 us). LL moves 4 data bytes per 8-byte line; LL128 120 of 128. The
 * model is NCCL's choice heuristic, not a timing: where a profile carries a measured small
 * all-reduce (nccl_latency) every base takes the measured excess on top (nccl_excess). */
enum { PR_LL, PR_LL128, PR_SIMPLE, PR_N };
static const double NCCL_BASE_RING[PR_N] = {6.6e-6, 14.0e-6, 8.4e-6};
static const double NCCL_BASE_TREE[PR_N] = {6.8e-6, 14.0e-6, 8.4e-6};
static const double NCCL_HOP_RATIO[PR_N] = {1.0, 1.9 / 0.6, 3.4 / 0.6};
static const double NCCL_BW_FRACTION[PR_N] = {0.5, 120.0 / 128.0, 1.0};

static const char *const ALGO_NAMES[KV_COLL_COUNT] = {"none", "one-shot", "two-shot", "ring", "tree",
                                                      "all-to-all", "p2p"};
const char *kv_coll_algo_name(kv_coll_algo a) { return a < KV_COLL_COUNT ? ALGO_NAMES[a] : "?"; }

/* GPUs one all-to-all link domain holds: the profile's node size, else everything. */
static int node_size(const scn_hardware *hw, int p) { return hw->gpus_per_node > 0 && hw->gpus_per_node < p ? hw->gpus_per_node : p; }

/* What a NCCL all-reduce costs beyond NCCL's own latency model (kernel start, the graph node,
 * the protocol's first flag round trip): the profile's measured small all-reduce over
 * nccl_latency_gpus GPUs less the tuning model's ring-LL latency for that many GPUs; 0 where the
 * profile has no measurement. The loader keeps the measurement above the ring's 2 (g - 1) hops,
 * so every protocol's base plus it stays positive. docs/cost-model.md, "Collectives", derives it. */
static double nccl_excess(const scn_hardware *hw)
{
    if (hw->nccl_latency <= 0 || hw->nccl_latency_gpus < 2) return 0;
    return hw->nccl_latency - (NCCL_BASE_RING[PR_LL] + 2.0 * (hw->nccl_latency_gpus - 1) * hw->link_latency);
}

static double link_bw(const scn_hardware *hw) { return hw->link_bandwidth * hw->eff_link; }
static double net_bw(const scn_hardware *hw) { return hw->net_bandwidth * hw->eff_link; }

static kv_coll_cost make(kv_coll_algo a, double latency, double net_bytes, double bw)
{
    kv_coll_cost c = {.algo = a, .latency = latency, .net_bytes = net_bytes};
    c.transfer = net_bytes > 0 ? (bw > 0 ? net_bytes / bw : INFINITY) : 0;
    c.seconds = c.latency + c.transfer;
    return c;
}

/* One-shot latency over p GPUs: the two-GPU figure plus one increment per further peer. */
static double oneshot_latency(const scn_hardware *hw, int p)
{
    return hw->oneshot_latency + (p > 2 ? p - 2 : 0) * hw->oneshot_latency_peer;
}

/* NCCL's fastest protocol (LL, LL128, Simple) for an algorithm whose fixed part is base[pr] plus
 * `hops` seconds of link latency (scaled by each protocol's hop ratio) and which moves `moved`
 * bytes through every rank at `bmin`, the slowest link on its path. */
static kv_coll_cost nccl_protocols(const scn_hardware *hw, kv_coll_algo a, const double *base, double hops, double moved,
                                   double bmin, int nodes)
{
    kv_coll_cost best = make(a, INFINITY, 0, 1);
    double excess = nccl_excess(hw);
    for (int pr = 0; pr < PR_N; pr++) {
        /* LL128 and Simple stream at NCCL's measured large-message rate where the profile has one
         * and the ring stays in the node; LL at half the link's (its 8-byte lines carry 4 data
         * bytes, and its small-message readings sit below that already). */
        double b = bmin;
        if (pr != PR_LL && nodes == 1 && hw->nccl_bandwidth > 0) b = hw->nccl_bandwidth;
        kv_coll_cost c = make(a, base[pr] + excess + hops * NCCL_HOP_RATIO[pr], moved, b * NCCL_BW_FRACTION[pr]);
        if (c.seconds < best.seconds) best = c;
    }
    return best;
}

kv_coll_cost kv_allreduce_algo(const scn_hardware *hw, int p, double bytes, kv_coll_algo a)
{
    if (p <= 1 || bytes <= 0) return make(KV_COLL_NONE, 0, 0, 1);
    int g = node_size(hw, p), nodes = (p + g - 1) / g;
    /* Across nodes NCCL runs a channel per NIC, and the profiles' network bandwidth is one GPU's
     * NIC (DGX A100/H100: one NIC per GPU): the g rings of a node leave it through g NICs, so the
     * node boundary carries g NICs' rate, and the NVLink hops inside the node carry every ring
     * (docs/cost-model.md, "Collectives", "Across nodes"). */
    double bmin = nodes > 1 ? fmin(link_bw(hw), net_bw(hw) * g) : link_bw(hw);
    double hop = nodes > 1 ? fmax(hw->link_latency, hw->net_latency) : hw->link_latency;
    switch (a) {
    case KV_COLL_ONESHOT:
        /* Every rank reads the p - 1 peers' whole buffers and reduces locally. */
        return make(a, oneshot_latency(hw, p), (p - 1) * bytes, link_bw(hw));
    case KV_COLL_TWOSHOT:
        /* Reduce-scatter then all-gather through peer memory: 2 (p-1)/p of the message each
         * way. Where the profile carries the kernel's measured fixed cost and rate, those;
         * else one-shot's latency plus a second barrier over the p - 1 peers, at the link's rate. */
        return make(a,
                    hw->twoshot_latency > 0 ? hw->twoshot_latency
                                            : oneshot_latency(hw, p) + (p - 1) * hw->oneshot_latency_peer,
                    2.0 * (p - 1) / p * bytes, hw->twoshot_bandwidth > 0 ? hw->twoshot_bandwidth : link_bw(hw));
    case KV_COLL_RING:
        return nccl_protocols(hw, a, NCCL_BASE_RING, 2.0 * (p - 1) * hop, 2.0 * (p - 1) / p * bytes, bmin, nodes);
    case KV_COLL_TREE: {
        /* Up and down a tree: log2(nodes) network steps and g - 1 chained NVLink steps each way;
         * the message goes up once and comes down once. */
        double steps = ceil(log2((double)nodes)) * fmax(hw->net_latency, hw->link_latency) + (g - 1) * hw->link_latency;
        return nccl_protocols(hw, a, NCCL_BASE_TREE, 2.0 * steps, 2.0 * bytes, bmin, nodes);
    }
    default:
        return make(KV_COLL_NONE, INFINITY, 0, 1);
    }
}

kv_coll_cost kv_allgather_time(const scn_hardware *hw, int p, double bytes)
{
    if (p <= 1 || bytes <= 0) return make(KV_COLL_NONE, 0, 0, 1);
    int g = node_size(hw, p), nodes = (p + g - 1) / g;
    double bmin = nodes > 1 ? fmin(link_bw(hw), net_bw(hw) * g) : link_bw(hw);
    double hop = nodes > 1 ? fmax(hw->link_latency, hw->net_latency) : hw->link_latency;
    /* The all-reduce's ring (kv_allreduce_algo) is a reduce-scatter and an all-gather of p - 1
     * steps each; the all-gather alone is the second half: half the hops, half the bytes. */
    return nccl_protocols(hw, KV_COLL_RING, NCCL_BASE_RING, (p - 1) * hop, (p - 1.0) / p * bytes, bmin, nodes);
}

static kv_coll_cost engine_allreduce(const scn_hardware *hw, const scn_engine *e, int p, double bytes);

kv_coll_cost kv_allreduce_time(const scn_hardware *hw, const scn_engine *e, int p, double bytes)
{
    kv_coll_cost c = engine_allreduce(hw, e, p, bytes);
    /* A framework that copies the message first (torch's functional all_reduce clones its input
     * into a fresh output, then reduces that in place) reads and writes it once more per copy in
     * device memory; the copy kernel's boundary is the step model's (kv_roofline.c counts it).
     * PyTorch's intra-node kernels stage the message into the peer-visible buffer with one copy
     * of their own (a cudaMemcpyAsync in each of its algorithms); a message they hand to NCCL
     * skips it. */
    c.copies = c.algo != KV_COLL_NONE ? e->allreduce_copies : 0;
    if (e->allreduce == SCN_AR_INTRANODE && c.copies > 0 && c.algo != KV_COLL_ONESHOT && c.algo != KV_COLL_TWOSHOT)
        c.copies--;
    if (c.copies > 0) {
        double bw = hw->memory_bandwidth * hw->eff_bandwidth;
        c.copy = bw > 0 ? c.copies * 2.0 * bytes / bw : 0;
        c.seconds += c.copy;
    }
    return c;
}

static kv_coll_cost engine_allreduce(const scn_hardware *hw, const scn_engine *e, int p, double bytes)
{
    if (p <= 1 || bytes <= 0) return make(KV_COLL_NONE, 0, 0, 1);
    int g = node_size(hw, p);
    /* Custom all-reduce needs every GPU to reach every other's memory in one node: NVSwitch or
     * a full Infinity Fabric mesh, or just two GPUs (vLLM allows two over PCIe). */
    bool mesh = hw->link == SCN_LINK_NVLINK || hw->link == SCN_LINK_INFINITY_FABRIC;
    /* vLLM's size rule, both limits exclusive (should_custom_ar: inp_size < max_size; the kernel's
     * REDUCE_CASE: bytes < 256 KiB on 8, < 512 KiB on 4): a message of exactly a limit, common
     * with power-of-two batches and hidden sizes (16 x 8192 x 2 B = 256 KiB), takes the next
     * algorithm. One-shot always for 2 GPUs, up to twice the 8-GPU limit for 4. */
    if (e->allreduce == SCN_AR_CUSTOM && g == p && (mesh || p == 2) && bytes < e->custom_max) {
        double one = p == 2 ? e->custom_max : p <= 4 ? 2.0 * e->oneshot_max : e->oneshot_max;
        return kv_allreduce_algo(hw, p, bytes, bytes < one ? KV_COLL_ONESHOT : KV_COLL_TWOSHOT);
    }
    /* PyTorch's intra-node all-reduce (IntraNodeComm, selectAllReduceAlgo): bf16 messages up to
     * oneshot_max (kOneShotThreshBytes, 256 KiB) one-shot and up to custom_max
     * (kTwoShotThreshBytes, 10 MiB) two-shot, both limits inclusive and the same for every group
     * size; only where every GPU of the group has NVLink to every other (its rendezvous gives up
     * on any other topology, PCIe included, and on ROCm builds), and NCCL otherwise. */
    if (e->allreduce == SCN_AR_INTRANODE && g == p && hw->link == SCN_LINK_NVLINK && bytes <= e->custom_max)
        return kv_allreduce_algo(hw, p, bytes, bytes <= e->oneshot_max ? KV_COLL_ONESHOT : KV_COLL_TWOSHOT);
    /* NCCL picks the algorithm and protocol its own cost model says is fastest; within a node
     * it runs rings. */
    kv_coll_cost r = kv_allreduce_algo(hw, p, bytes, KV_COLL_RING);
    if (g < p) {
        kv_coll_cost t = kv_allreduce_algo(hw, p, bytes, KV_COLL_TREE);
        if (t.seconds < r.seconds) r = t;
    }
    return r;
}

kv_coll_cost kv_alltoall_time(const scn_hardware *hw, int p, double bytes)
{
    if (p <= 1 || bytes <= 0) return make(KV_COLL_NONE, 0, 0, 1);
    int g = node_size(hw, p);
    /* Each rank keeps 1/p of its buffer and sends the rest: (g-1)/p over the link to peers in
     * its node, (p-g)/p over the network; both go at once, so the slower share binds. */
    double in = (g - 1.0) / p * bytes, out = (double)(p - g) / p * bytes;
    double t_in = in > 0 ? in / link_bw(hw) : 0, t_out = out > 0 ? out / net_bw(hw) : 0;
    double hop = g < p ? fmax(hw->link_latency, hw->net_latency) : hw->link_latency;
    kv_coll_cost c = {.algo = KV_COLL_ALLTOALL, .latency = NCCL_BASE_RING[PR_SIMPLE] + hop * NCCL_HOP_RATIO[PR_SIMPLE],
                      .net_bytes = in + out};
    c.transfer = fmax(t_in, t_out);
    c.seconds = c.latency + c.transfer;
    return c;
}

kv_coll_cost kv_p2p_time(const scn_hardware *hw, double bytes, bool same_node)
{
    if (bytes <= 0) return make(KV_COLL_NONE, 0, 0, 1);
    double hop = same_node ? hw->link_latency : hw->net_latency;
    return make(KV_COLL_P2P, NCCL_BASE_RING[PR_SIMPLE] + hop * NCCL_HOP_RATIO[PR_SIMPLE], bytes,
                same_node ? link_bw(hw) : net_bw(hw));
}

/* scn_hf.c: translates a Hugging Face config.json (parsed by the same YAML reader) into a
 * kvplan model mapping. Keys the cost model does not use are ignored, as are nulls. Each
 * translated value keeps the position of the JSON value it came from, so a bad value is
 * reported at its line in config.json. docs/scenarios.md lists the key mapping. */
#include "scn_bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Plain renames: HF key -> kvplan key. First match wins for aliases. */
static const char *const RENAMES[][2] = {
    {"num_hidden_layers", "layers"},
    {"hidden_size", "hidden"},
    {"num_attention_heads", "heads"},
    {"num_key_value_heads", "kv_heads"},
    {"head_dim", "head_dim"},
    {"intermediate_size", "intermediate"},
    {"vocab_size", "vocab"},
    {"tie_word_embeddings", "tie_embeddings"},
    {"attention_bias", "attention_bias"},
    {"max_position_embeddings", "max_position"},
    {"torch_dtype", "weight_dtype"},
    {"num_local_experts", "experts"},
    {"n_routed_experts", "experts"},
    {"num_experts", "experts"},
    {"num_experts_per_tok", "experts_per_token"},
    {"moe_intermediate_size", "moe_intermediate"},
    {"n_shared_experts", "shared_experts"},
    {"first_k_dense_replace", "dense_layers"},
    {"n_group", "expert_groups"},
    {"kv_lora_rank", "kv_lora_rank"},
    {"q_lora_rank", "q_lora_rank"},
    {"qk_rope_head_dim", "qk_rope_head_dim"},
    {"qk_nope_head_dim", "qk_nope_head_dim"},
    {"v_head_dim", "v_head_dim"},
    {"num_nextn_predict_layers", "mtp_layers"},
};

static bool present(const scn_node *m, const char *k)
{
    const scn_node *v = scn_map_get(m, k);
    return v && !(v->kind == SCN_NODE_SCALAR && !v->quoted && !strcmp(v->text, "null"));
}

static scn_node *scalar(scn_ctx *c, const scn_node *at, const char *text)
{
    scn_node *n = scn_node_new(c->doc, SCN_NODE_SCALAR, at->file, at->line, at->col);
    if (n) n->text = scn_doc_strdup(c->doc, text);
    return n;
}

static int set_int(scn_ctx *c, scn_node *out, const scn_node *at, const char *key, long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    scn_node *n = scalar(c, at, buf);
    return n ? scn_map_set(c->doc, out, key, n) : -1;
}

static long int_of(const scn_node *m, const char *k, long dflt)
{
    const scn_node *v = scn_map_get(m, k);
    if (!v || v->kind != SCN_NODE_SCALAR) return dflt;
    char *end;
    long x = strtol(v->text, &end, 10);
    return end != v->text && !*end ? x : dflt;
}

static const char *str_of(const scn_node *m, const char *k)
{
    const scn_node *v = scn_map_get(m, k);
    return v && v->kind == SCN_NODE_SCALAR ? v->text : "";
}

static int set_str(scn_ctx *c, scn_node *out, const scn_node *at, const char *key, const char *v)
{
    scn_node *n = scalar(c, at, v);
    return n ? scn_map_set(c->doc, out, key, n) : -1;
}

/* A quantised checkpoint's quantization_config names its weight format (docs/cost-model.md,
 * "Quantised weights"): AWQ and GPTQ 4-bit with their group size, fp8 per tensor or in blocks
 * (weight_block_size), ModelOpt NVFP4/FP8. Methods kvplan does not know are left to the model's
 * own fields, so an unknown one reads as its torch_dtype. */
static int translate_quant(scn_ctx *c, const scn_node *cfg, scn_node *out)
{
    const scn_node *q = scn_map_get(cfg, "quantization_config");
    if (!q || q->kind != SCN_NODE_MAP) return 0;
    const char *method = str_of(q, "quant_method"), *algo = str_of(q, "quant_algo");
    long bits = int_of(q, "bits", 4), group = int_of(q, "group_size", 128);
    if ((!strcmp(method, "awq") || !strcmp(method, "gptq")) && bits == 4) {
        if (set_str(c, out, q, "weight_dtype", "int4") || set_str(c, out, q, "weight_quant", method) ||
            set_int(c, out, q, "weight_group", group > 0 ? group : 128))
            return -1;
    } else if (!strcmp(method, "fp8") || (!strcmp(method, "modelopt") && !strcmp(algo, "FP8"))) {
        const scn_node *blk = scn_map_get(q, "weight_block_size");
        bool block = blk && blk->kind == SCN_NODE_SEQ && blk->n == 2 && blk->vals[0]->kind == SCN_NODE_SCALAR;
        if (set_str(c, out, q, "weight_dtype", "fp8") || set_str(c, out, q, "weight_quant", block ? "block" : "per_tensor"))
            return -1;
        if (block && set_int(c, out, q, "weight_group", strtol(blk->vals[0]->text, NULL, 10))) return -1;
    } else if (!strcmp(method, "modelopt") && !strcmp(algo, "NVFP4")) {
        if (set_str(c, out, q, "weight_dtype", "fp4") || set_str(c, out, q, "weight_quant", "nvfp4") ||
            set_int(c, out, q, "weight_group", group > 0 && group != 128 ? group : 16))
            return -1;
    }
    return 0;
}

scn_node *scn_hf_translate(scn_ctx *c, const scn_node *cfg, const char *path)
{
    if (scn_expect_map(c, cfg, path)) return NULL;
    scn_node *out = scn_node_new(c->doc, SCN_NODE_MAP, cfg->file, cfg->line, cfg->col);
    if (!out) return NULL;
    for (size_t i = 0; i < sizeof RENAMES / sizeof RENAMES[0]; i++) {
        const char *from = RENAMES[i][0], *to = RENAMES[i][1];
        if (present(cfg, from) && !scn_map_get(out, to) &&
            scn_map_set(c->doc, out, to, scn_map_get(cfg, from)))
            return NULL;
    }
    const char *type = str_of(cfg, "model_type");
    const char *name = str_of(cfg, "_name_or_path");
    scn_node *nm = scalar(c, cfg, name[0] ? name : type[0] ? type : "hf-model");
    if (!nm || scn_map_set(c->doc, out, "name", nm)) return NULL;
    /* Each family's config leaves some facts implicit; fill them as the family's code does. */
    bool gemma = !strncmp(type, "gemma", 5);
    if (!present(cfg, "tie_word_embeddings")) {
        scn_node *t = scalar(c, cfg, gemma ? "true" : "false");
        if (!t || scn_map_set(c->doc, out, "tie_embeddings", t)) return NULL;
    }
    if (!strcmp(type, "qwen2") && !present(cfg, "attention_bias")) {
        scn_node *t = scalar(c, cfg, "true");   /* Qwen2 always biases q/k/v */
        if (!t || scn_map_set(c->doc, out, "attention_bias", t)) return NULL;
    }
    if (gemma && set_int(c, out, cfg, "norms_per_layer", 4)) return NULL;
    if (!strcmp(type, "mixtral") && present(cfg, "intermediate_size") &&
        scn_map_set(c->doc, out, "moe_intermediate", scn_map_get(cfg, "intermediate_size")))
        return NULL;
    /* Qwen-MoE names the shared expert by its width, not a count. */
    long shared_w = int_of(cfg, "shared_expert_intermediate_size", 0), moe_w = int_of(cfg, "moe_intermediate_size", 0);
    if (shared_w > 0 && moe_w > 0 && !present(cfg, "n_shared_experts") &&
        set_int(c, out, cfg, "shared_experts", (shared_w + moe_w / 2) / moe_w))
        return NULL;
    /* Sliding windows: only when switched on, and only on the layers that use them. */
    const scn_node *sw = scn_map_get(cfg, "sliding_window");
    bool use_sw = present(cfg, "sliding_window") && strcmp(str_of(cfg, "use_sliding_window"), "false") != 0;
    long layers = int_of(cfg, "num_hidden_layers", 0);
    if (use_sw && int_of(cfg, "sliding_window", 0) > 0) {
        long n_local = layers;
        const scn_node *lt = scn_map_get(cfg, "layer_types");
        if (lt && lt->kind == SCN_NODE_SEQ) {
            n_local = 0;
            for (int i = 0; i < lt->n; i++)
                if (lt->vals[i]->kind == SCN_NODE_SCALAR && strstr(lt->vals[i]->text, "sliding")) n_local++;
        } else if (!strcmp(type, "gemma2")) {
            n_local = (layers + 1) / 2;                 /* even-numbered layers are local */
        } else if (int_of(cfg, "sliding_window_pattern", 0) > 0) {
            n_local = layers - layers / int_of(cfg, "sliding_window_pattern", 1); /* every Nth is global */
        } else if (!strcmp(type, "qwen2") && present(cfg, "max_window_layers")) {
            n_local = layers - int_of(cfg, "max_window_layers", 0);
            if (n_local < 0) n_local = 0;
        }
        if (n_local > 0) {
            if (scn_map_set(c->doc, out, "sliding_window", (scn_node *)sw) ||
                set_int(c, out, sw, "sliding_layers", n_local))
                return NULL;
        }
    }
    if (translate_quant(c, cfg, out)) return NULL;
    return out;
}

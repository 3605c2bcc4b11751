"""Models of many families from HuggingFace transformers' own modeling code,
with PyTorch's numbers to compare Strata's against.

Runs in the environment install-deps.sh --models makes (.venv-models:
Debian's PyTorch plus a pinned transformers). For one family it builds the
model from a small config with random weights (nothing from a model hub),
exports it to ONNX at each requested opset with static or dynamic axes, and
writes, next to the models:

  ids.npy, logits.npy      one batch and PyTorch's logits for it
  ids2.npy, logits2.npy    another batch (not the one traced) and its logits
  data.npy                 token rows for training (ids = row[:T], labels =
                           row[1:], batch i of step s = rows[s*B + i])
  <opt>.losses.npy         PyTorch's loss at each of the steps, for sgd and
                           adamw (the hyper-parameters are in meta.json)
  <opt>.weights.npz        the parameters after the steps, by ONNX name
  <opt>.noise.npz          where a parameter's gradient was rounding noise
                           (AdamW: at most 1e-4 of its tensor's largest at
                           some step)
  meta.json                the exports, the frozen (non-parameter) tensors,
                           the optimizer settings
  aux.*                    the mixtures of experts: with their own loss,
                           the load-balancing term included (router_aux)

    families.py --family gpt2 --work DIR [--opsets 14,17] [--axes static,dynamic]
"""

import argparse
import copy
import json
import os
import sys
import warnings

import numpy as np
import torch

BATCH, SEQ, VOCAB, STEPS = 2, 8, 96, 3
OPTIMIZERS = {
    "sgd": {"flags": ["--lr", "0.05"],
            "make": lambda p: torch.optim.SGD(p, lr=0.05)},
    # eps 1e-6: gradients that are rounding noise (1e-10, exactly zero in
    # exact arithmetic) then move their weights by a thousandth of a step,
    # not by a full step of either sign, which would shift every later
    # gradient differently on each side.
    "adamw": {"flags": ["--lr", "0.003", "--weight-decay", "0.01",
                        "--eps", "1e-6"],
              "make": lambda p: torch.optim.AdamW(p, lr=0.003,
                                                  weight_decay=0.01,
                                                  eps=1e-6)},
}


def _moe_model():
    """A decoder with mixture-of-experts MLPs routed top-2 per token
    (Mixtral's routing: softmax over the router's logits, the two largest
    kept and renormalised). Transformers' own MoE models dispatch tokens
    with data-dependent shapes (nonzero, index_add), which a static-shape
    compiler cannot take; this one runs every expert and combines them with
    the sparse routing weights (TopK + ScatterElements), which exports with
    static shapes and trains like the dispatching form."""
    nn = torch.nn

    class Experts(nn.Module):
        def __init__(self, dim, hidden, count, k):
            super().__init__()
            self.router = nn.Linear(dim, count, bias=False)
            self.up = nn.Parameter(torch.randn(count, dim, hidden) * 0.1)
            self.down = nn.Parameter(torch.randn(count, hidden, dim) * 0.1)
            self.k = k

        def forward(self, x):
            probs = torch.softmax(self.router(x), dim=-1)
            top, idx = torch.topk(probs, self.k, dim=-1)
            top = top / top.sum(dim=-1, keepdim=True)
            gates = torch.zeros_like(probs).scatter(-1, idx, top)
            h = torch.einsum("btd,edh->bteh", x, self.up)
            y = torch.einsum("bteh,ehd->bted", torch.nn.functional.silu(h),
                             self.down)
            return torch.einsum("bted,bte->btd", y, gates)

    class Block(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.ln2 = nn.LayerNorm(dim)
            self.moe = Experts(dim, 2 * dim, 4, 2)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = [y.reshape(b, t, self.heads, -1).transpose(1, 2)
                       for y in (q, k, v)]
            s = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            s = s.masked_fill(mask, float("-inf"))
            a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2)
            x = x + self.proj(a.reshape(b, t, d))
            return x + self.moe(self.ln2(x))

    class MoE(nn.Module):
        def __init__(self, dim=32, heads=4, layers=2):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, dim)
            self.pos = nn.Embedding(64, dim)
            self.blocks = nn.ModuleList(Block(dim, heads)
                                        for _ in range(layers))
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, VOCAB, bias=False)

        def forward(self, input_ids):
            pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
            x = self.embed(input_ids) + self.pos(pos)
            for b in self.blocks:
                x = b(x)
            return self.head(self.norm(x))

    return MoE()


def build(family):
    """A small randomly initialised model mapping ids [B, T] to logits
    [B, T, V], and the keyword its forward takes."""
    import transformers as T
    small = dict(vocab_size=VOCAB)
    decoder = dict(small, hidden_size=32, intermediate_size=64,
                   num_hidden_layers=2, num_attention_heads=4,
                   max_position_embeddings=64)
    configs = {
        "gpt2": lambda: (T.GPT2Config(n_embd=32, n_layer=2, n_head=4,
                                      n_positions=64, **small),
                         T.GPT2LMHeadModel),
        "gpt_neox": lambda: (T.GPTNeoXConfig(rotary_pct=0.5, **decoder),
                             T.GPTNeoXForCausalLM),
        "llama": lambda: (T.LlamaConfig(num_key_value_heads=2, **decoder),
                          T.LlamaForCausalLM),
        "mistral": lambda: (T.MistralConfig(num_key_value_heads=2,
                                            sliding_window=4, **decoder),
                            T.MistralForCausalLM),
        "qwen2": lambda: (T.Qwen2Config(num_key_value_heads=2, **decoder),
                          T.Qwen2ForCausalLM),
        "gemma": lambda: (T.GemmaConfig(num_key_value_heads=1, head_dim=8,
                                        **decoder),
                          T.GemmaForCausalLM),
        "phi": lambda: (T.PhiConfig(partial_rotary_factor=0.5, **decoder),
                        T.PhiForCausalLM),
        "stablelm": lambda: (T.StableLmConfig(num_key_value_heads=4,
                                              **decoder),
                             T.StableLmForCausalLM),
        "falcon": lambda: (T.FalconConfig(hidden_size=32,
                                          num_hidden_layers=2,
                                          num_attention_heads=4,
                                          new_decoder_architecture=False,
                                          multi_query=True, alibi=False,
                                          **small),
                           T.FalconForCausalLM),
        "opt": lambda: (T.OPTConfig(hidden_size=32, num_hidden_layers=2,
                                    ffn_dim=64, num_attention_heads=4,
                                    max_position_embeddings=64,
                                    word_embed_proj_dim=32, **small),
                        T.OPTForCausalLM),
        "bloom": lambda: (T.BloomConfig(hidden_size=32, n_layer=2, n_head=4,
                                        **small),
                          T.BloomForCausalLM),
        "gptj": lambda: (T.GPTJConfig(n_embd=32, n_layer=2, n_head=4,
                                      rotary_dim=4, n_positions=64, **small),
                         T.GPTJForCausalLM),
        "codegen": lambda: (T.CodeGenConfig(n_embd=32, n_layer=2, n_head=4,
                                            rotary_dim=4, n_positions=64,
                                            n_ctx=64, **small),
                            T.CodeGenForCausalLM),
        "gpt_bigcode": lambda: (T.GPTBigCodeConfig(n_embd=32, n_layer=2,
                                                   n_head=4, n_positions=64,
                                                   multi_query=True, **small),
                                T.GPTBigCodeForCausalLM),
        "bert": lambda: (T.BertConfig(hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=4,
                                      intermediate_size=64,
                                      max_position_embeddings=64, **small),
                         T.BertForMaskedLM),
        # Transformers' own mixtures of experts: routing by NonZero on the
        # data path (each expert's tokens), index_add_ to combine.
        "mixtral": lambda: (T.MixtralConfig(num_key_value_heads=2,
                                            num_local_experts=4,
                                            num_experts_per_tok=2,
                                            **decoder),
                            T.MixtralForCausalLM),
        "qwen2_moe": lambda: (T.Qwen2MoeConfig(
            num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, shared_expert_intermediate_size=64,
            decoder_sparse_step=1, **decoder), T.Qwen2MoeForCausalLM),
        "t5": lambda: (T.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                  num_heads=4, **small),
                       T.T5ForConditionalGeneration),
    }
    if family == "moe":
        return _moe_model()
    config, cls = configs[family]()
    # No dropout anywhere, no cache: the exported graph is the training one.
    for key in list(config.to_dict()):
        if "dropout" in key or key.endswith("_pdrop"):
            value = getattr(config, key, None)
            if isinstance(value, float):
                setattr(config, key, 0.0)
    config.use_cache = False
    # nn.Embedding's padding_idx (its row gets no gradient) is not part of
    # the ONNX graph; these models have no padding token, as pretraining
    # data packed into full rows has none.
    config.pad_token_id = None
    try:
        config._attn_implementation = "eager"
    except AttributeError:
        pass
    model = cls(config)

    class Logits(torch.nn.Module):
        """ids -> logits; T5 decodes the ids it encodes (teacher forcing)."""

        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids):
            if family == "t5":
                return self.m(input_ids=input_ids,
                              decoder_input_ids=input_ids,
                              return_dict=False)[0]
            return self.m(input_ids=input_ids, return_dict=False)[0]

    return Logits()


def router_aux(family, module, ids, rows, work):
    """For the mixtures of experts: the model exported with its own loss
    (labels in; transformers adds router_aux_loss_coef times the
    load-balancing loss to the cross-entropy) and the router logits as
    outputs, PyTorch's losses over 3 SGD steps of it, and the gradient of
    the load-balancing loss alone (a second export, it the first output)
    with respect to every router weight. None for other families."""
    if family not in ("mixtral", "qwen2_moe"):
        return None
    m = copy.deepcopy(module.m)
    m.config.output_router_logits = True
    m.config.router_aux_loss_coef = 0.02
    layers = m.config.num_hidden_layers

    class WithLoss(torch.nn.Module):
        def __init__(self, aux_first):
            super().__init__()
            self.m = m
            self.aux_first = aux_first

        def forward(self, input_ids, labels=None):
            o = self.m(input_ids=input_ids, labels=labels, return_dict=True)
            first = (o.aux_loss,) if self.aux_first else (o.loss,)
            return first + tuple(o.router_logits)

    names = ["router%d" % i for i in range(layers)]
    trace = torch.from_numpy(ids)
    paths = {"train": os.path.join(work, family + "_aux_train.onnx"),
             "aux": os.path.join(work, family + "_aux_only.onnx")}
    with torch.no_grad():
        torch.onnx.export(WithLoss(False).eval(), (trace, trace),
                          paths["train"], input_names=["input_ids", "labels"],
                          output_names=["loss"] + names, opset_version=17,
                          do_constant_folding=False)
        torch.onnx.export(WithLoss(True).eval(), (trace,), paths["aux"],
                          input_names=["input_ids"],
                          output_names=["aux_loss"] + names, opset_version=17,
                          do_constant_folding=False)
    wrapper = WithLoss(True)
    out = wrapper(trace)
    out[0].backward()
    routers = {}
    for n, p in wrapper.named_parameters():
        if (".gate.weight" in n and "shared_expert_gate" not in n) and \
                p.grad is not None:
            routers[n] = p.grad.numpy().copy()
    if not routers:
        raise SystemExit("families.py: no router weight found in " + family)
    np.savez(os.path.join(work, "aux.grad.npz"), **routers)
    for i, r in enumerate(out[1:]):
        np.save(os.path.join(work, "aux.router%d.npy" % i),
                r.detach().numpy())
    np.save(os.path.join(work, "aux.loss.npy"), out[0].detach().numpy())
    trained = copy.deepcopy(m).train()
    opt = torch.optim.SGD(trained.parameters(), lr=0.05)
    losses = []
    for step in range(STEPS):
        batch = torch.from_numpy(rows[step * BATCH:(step + 1) * BATCH, :SEQ])
        opt.zero_grad()
        loss = trained(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.save(os.path.join(work, "aux.sgd.losses.npy"), np.array(losses))
    return {"train": paths["train"], "aux": paths["aux"], "routers": names,
            "lr": 0.05}


def loss_of(module, ids, labels):
    logits = module(torch.from_numpy(ids))
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        torch.from_numpy(labels).reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--opsets", default="14,17")
    ap.add_argument("--axes", default="static,dynamic")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    os.makedirs(args.work, exist_ok=True)
    torch.manual_seed(0)
    module = build(args.family).eval()
    # Every parameter gets its own values: the exporter merges initializers
    # with equal contents (freshly initialised norms are all ones), which
    # would tie parameters PyTorch trains separately.
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape) * 0.02)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, VOCAB, size=(BATCH, SEQ), dtype=np.int64)
    np.save(os.path.join(args.work, "ids.npy"), ids)
    with torch.no_grad():
        np.save(os.path.join(args.work, "logits.npy"),
                module(torch.from_numpy(ids)).numpy())
    # A second batch: a model whose routing depends on the data (the
    # mixtures of experts) must be right for batches it was not traced on.
    ids2 = rng.integers(0, VOCAB, size=(BATCH, SEQ), dtype=np.int64)
    np.save(os.path.join(args.work, "ids2.npy"), ids2)
    with torch.no_grad():
        np.save(os.path.join(args.work, "logits2.npy"),
                module(torch.from_numpy(ids2)).numpy())
    rows = rng.integers(0, VOCAB, size=(BATCH * STEPS, SEQ + 1),
                        dtype=np.int64)
    np.save(os.path.join(args.work, "data.npy"), rows)

    exports = []
    params = dict(module.named_parameters())
    frozen = set()
    for opset in [int(o) for o in args.opsets.split(",")]:
        for axes in args.axes.split(","):
            path = os.path.join(args.work, "%s_%d_%s.onnx" % (
                args.family, opset, axes))
            kwargs = {}
            trace = torch.from_numpy(ids)
            if axes == "dynamic":
                kwargs["dynamic_axes"] = {"input_ids": {0: "batch",
                                                        1: "seq"}}
                trace = trace[:, :SEQ - 3]  # traced at another length
            with torch.no_grad():
                # No constant folding: a folded transpose of a weight would
                # become a separate tensor (and untie tied embeddings).
                torch.onnx.export(module, (trace,), path,
                                  input_names=["input_ids"],
                                  output_names=["logits"],
                                  opset_version=opset,
                                  do_constant_folding=False, **kwargs)
            import onnx
            model = onnx.load(path, load_external_data=False)
            for init in model.graph.initializer:
                if init.name not in params and init.data_type in (1, 10, 11,
                                                                  16):
                    frozen.add(init.name)
            exports.append({"path": path, "opset": opset, "axes": axes})

    for name, opt in OPTIMIZERS.items():
        m = copy.deepcopy(module).train()
        optimizer = opt["make"](m.parameters())
        losses = []
        noise = {n: np.ones(p.shape, bool) for n, p in m.named_parameters()}
        faint = {n: np.zeros(p.shape, bool) for n, p in m.named_parameters()}
        for step in range(STEPS):
            batch = rows[step * BATCH:(step + 1) * BATCH]
            optimizer.zero_grad()
            loss = loss_of(m, batch[:, :SEQ].copy(), batch[:, 1:].copy())
            loss.backward()
            for n, p in m.named_parameters():
                if p.grad is None:
                    continue
                g = np.abs(p.grad.numpy())
                noise[n] &= g <= 1e-6 * max(float(g.max()), 1e-30)
                faint[n] |= g <= 1e-4 * max(float(g.max()), 1e-30)
            optimizer.step()
            losses.append(loss.item())
        np.save(os.path.join(args.work, name + ".losses.npy"),
                np.array(losses))
        np.savez(os.path.join(args.work, name + ".weights.npz"),
                 **{n: p.detach().numpy() for n, p in m.named_parameters()})
        # Adam divides by the gradient's magnitude: where it is a thousandth
        # of its tensor's largest or less at some step, float32 rounding of
        # it moves the step's direction; those entries are "faint".
        np.savez(os.path.join(args.work, name + ".noise.npz"),
                 **(faint if name == "adamw" else noise))

    aux = router_aux(args.family, module, ids, rows, args.work)

    with open(os.path.join(args.work, "meta.json"), "w") as f:
        json.dump({"family": args.family, "batch": BATCH, "seq": SEQ,
                   "aux": aux,
                   "steps": STEPS, "exports": exports,
                   "frozen": sorted(frozen),
                   "optimizers": {n: o["flags"]
                                  for n, o in OPTIMIZERS.items()}}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

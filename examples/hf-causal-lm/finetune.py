#!/usr/bin/env python3
"""Fine-tunes a HuggingFace causal LM with Strata, from Python.

The path for people who use HuggingFace transformers:

1. a tokenizer (byte-level BPE) trained on a local text file with the
   `tokenizers` package (no hub is reachable: nothing is downloaded);
2. a model from transformers' own modeling code (LLaMA by default) built
   from a small config with random weights, exported to ONNX with
   strata.hf.export (the settings Strata trains from, and which tensors to
   freeze);
3. strata.compile: the training step (AdamW, cosine schedule, clipping);
4. a data pipeline of our own in NumPy (random windows of the tokenized
   text) feeding strata's Trainer a step at a time;
5. the trained weights written as safetensors with
   strata.hf.save_pretrained and loaded with transformers' own
   from_pretrained, which then generates a few tokens.

Run it with examples/hf-causal-lm/run.sh (which installs and builds what it
needs); it exits non-zero if the loss does not fall or the weights do not
come back.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

import strata
import strata.hf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def train_tokenizer(text_path, vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, \
        trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([text_path], trainer)
    return tok


def build_model(family, vocab, seq):
    import transformers as T
    common = dict(vocab_size=vocab, hidden_size=128, intermediate_size=256,
                  num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=seq, use_cache=False)
    if family == "llama":
        config = T.LlamaConfig(num_key_value_heads=2, **common)
        cls = T.LlamaForCausalLM
    elif family == "gpt2":
        config = T.GPT2Config(vocab_size=vocab, n_embd=128, n_layer=2,
                              n_head=4, n_positions=seq, use_cache=False,
                              resid_pdrop=0.0, embd_pdrop=0.0,
                              attn_pdrop=0.0)
        cls = T.GPT2LMHeadModel
    else:
        raise SystemExit("unknown --model %s (llama, gpt2)" % family)
    config._attn_implementation = "eager"
    config.pad_token_id = None
    torch.manual_seed(0)
    return cls(config)


class Logits(torch.nn.Module):
    """ids -> logits, for the held-out loss in PyTorch."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, return_dict=False)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", default=os.path.join(ROOT, "README.md"),
                    help="the text to train the tokenizer and the model on")
    ap.add_argument("--model", default="llama", help="llama or gpt2")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "examples",
                                                  "hf-causal-lm"))
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--backend", default=None, help="cpu, cuda (default: "
                    "cuda when a GPU is present)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    print("== 1. tokenizer: byte-level BPE, %d tokens, trained on %s"
          % (args.vocab, args.text))
    tok = train_tokenizer(args.text, args.vocab)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    ids = np.array(tok.encode(text).ids, dtype=np.int64)
    vocab = tok.get_vocab_size()
    print("   %d characters -> %d tokens" % (len(text), ids.size))
    # Held out: every tenth block of 256 tokens, so that it is text like
    # the rest (the first tenth alone, the README's title and opening, is
    # not, and any edit there moved the result).
    block = 256
    out = np.zeros(ids.size, dtype=bool)
    for b in range(0, ids.size, 10 * block):
        out[b:b + block] = True
    held, ids = ids[out], ids[~out]

    print("== 2. model: %s from transformers' modeling code, random weights"
          % args.model)
    model = build_model(args.model, vocab, args.seq)
    exported = strata.hf.export(model, os.path.join(args.out, "model.onnx"),
                                batch=2, seq=args.seq)
    print("   %.2fM parameters -> %s (%d tensors frozen)" % (
        sum(p.numel() for p in model.parameters()) / 1e6, exported.path,
        len(exported.frozen)))

    print("== 3. compile the training step with Strata")
    flags = ["--input-shape", "input_ids=%dx%d" % (args.batch, args.seq),
             "--optimizer", "adamw", "--lr", "3e-3", "--weight-decay", "0.01",
             "--clip-grad-norm", "1.0", "--lr-schedule", "cosine",
             "--warmup-steps", "10", "--total-steps", str(args.steps)]
    flags += exported.compile_flags
    art_path = os.path.join(args.out, "model.strata")
    strata.compile(exported.path, art_path, flags)
    art = strata.Artifact(art_path, backend=args.backend)
    trainer = art.trainer(checkpoint_dir=os.path.join(args.out, "ckpt"))

    print("== 4. fine-tune %d steps from a NumPy pipeline" % args.steps)
    rng = np.random.default_rng(0)

    def windows(source, count):
        starts = rng.integers(0, source.size - args.seq - 1, size=count)
        rows = np.stack([source[s:s + args.seq + 1] for s in starts])
        return {"input_ids": rows[:, :-1], "labels": rows[:, 1:]}

    losses = []
    start = time.time()
    for step in range(args.steps):
        m = trainer.step(windows(ids, args.batch))
        losses.append(m["loss"])
        if step % 25 == 0 or step + 1 == args.steps:
            print("   step %4d  loss %.4f  grad norm %.3f  lr %.2e  %.0f ms"
                  % (m["step"], m["loss"], m["grad_norm"], m["lr"],
                     m["seconds"] * 1e3))
    trainer.save()
    print("   %.1f s; checkpoint %s" % (time.time() - start,
                                       trainer.checkpoint_file))
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    print("   mean loss of the first 10 steps %.3f, of the last 10 %.3f"
          % (first, last))
    ok = last < first - 0.5

    print("== 5. the trained weights into transformers' from_pretrained")
    held_batch = windows(held, 16)

    def torch_loss(m):
        with torch.no_grad():
            logits = Logits(m)(torch.from_numpy(held_batch["input_ids"]))
            return torch.nn.functional.cross_entropy(
                logits.reshape(-1, vocab),
                torch.from_numpy(held_batch["labels"]).reshape(-1)).item()

    before = torch_loss(model)
    hf_dir = os.path.join(args.out, "finetuned")
    strata.hf.save_pretrained(art_path, hf_dir, model.config, exported,
                              checkpoint=trainer.checkpoint_file)
    model, info = type(model).from_pretrained(hf_dir,
                                              output_loading_info=True)
    after = torch_loss(model)
    print("   %s: %s; held-out loss in PyTorch %.3f -> %.3f"
          % (hf_dir, ", ".join(sorted(os.listdir(hf_dir))), before, after))
    if info["missing_keys"] or info["unexpected_keys"]:
        print("   error: missing %s, unexpected %s" % (info["missing_keys"],
                                                      info["unexpected_keys"]))
        ok = False
    ok = ok and after < before - 0.5

    prompt = "Strata is"
    prompt_ids = torch.tensor([tok.encode(prompt).ids])
    with torch.no_grad():
        model.eval()
        out = model.generate(prompt_ids, max_new_tokens=24, do_sample=False,
                             pad_token_id=0)
    print("   generated: %r" % tok.decode(out[0].tolist()))
    if not ok:
        print("error: the loss did not fall as expected", file=sys.stderr)
        return 1
    print("done: the loss fell and the weights came back")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Supervised fine-tuning data: examples in, token rows and labels out.

    import numpy as np, strata.data
    examples = strata.data.load("train.jsonl")      # JSONL or Parquet
    rows, labels, stats = strata.data.sft_rows(examples, tokenizer, seq=512)
    np.save("rows.npy", rows); np.save("labels.npy", labels)
    #   strata-run model.strata --data rows.npy --labels labels.npy \\
    #     --epochs 2 --shuffle 0 --eval-data held.npy --eval-labels ...

pack_rows puts several examples in a row instead (for a model exported with
strata.hf.export(..., packing=True)): each example is a segment, attending
to itself alone, its positions from 0; the rows come with their segment
ids (strata-run --segments).

An example is a chat ({"messages": [{"role": ..., "content": ...}, ...]},
the last message the assistant's) or a pair ({"prompt": ..., "response":
...}, also "instruction"/"input"/"output" as Alpaca has them). With a
tokenizer that has a chat template, the conversation is rendered with it
(tokenizer.apply_chat_template); without one, prompt and response are
joined and the end-of-text token appended. Only the response's tokens are
in the loss: every other label is -100, as transformers' collators mark
them. Each example is one row of seq + 1 tokens (strata-run's --data
rows), padded with the pad token (labels -100) or cut at seq + 1.
"""

import numpy as np

__all__ = ["IGNORE", "PAD_SEGMENT", "load", "tokenize", "sft_rows",
           "pack_rows", "positions", "batch"]

IGNORE = -100
# The segment of padding in packed rows (strata.data.pack_rows).
PAD_SEGMENT = -1


def load(path, split="train"):
    """The examples of a JSONL (.jsonl/.json) or Parquet file, through
    HuggingFace datasets (a datasets.Dataset: iterate it, or index it)."""
    import datasets
    kind = "parquet" if str(path).endswith(".parquet") else "json"
    return datasets.load_dataset(kind, data_files=str(path), split=split)


def _fast(tokenizer):
    """A transformers tokenizer for a tokenizers.Tokenizer (kept as is
    otherwise)."""
    try:
        import tokenizers
        if isinstance(tokenizer, tokenizers.Tokenizer):
            from transformers import PreTrainedTokenizerFast
            return PreTrainedTokenizerFast(tokenizer_object=tokenizer)
    except ImportError:
        pass
    return tokenizer


def _pad(tok, pad_id):
    """`pad_id`, else the tokenizer's pad token, else its end of text."""
    if pad_id is None:
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else \
            tok.eos_token_id
    if pad_id is None:
        raise ValueError("the tokenizer has no pad or end-of-text token: "
                         "give pad_id")
    return pad_id


def _messages(example):
    if "messages" in example:
        messages = list(example["messages"])
        if not messages or messages[-1].get("role") != "assistant":
            raise ValueError("an example's last message must be the "
                             "assistant's (the response to learn): %r"
                             % (messages[-1:],))
        return messages
    prompt = example.get("prompt", example.get("instruction"))
    response = example.get("response", example.get("output"))
    if prompt is None or response is None:
        raise ValueError("an example needs 'messages', or 'prompt' and "
                         "'response' (or 'instruction' and 'output'); it "
                         "has %s" % sorted(example))
    if example.get("input"):
        prompt = prompt + "\n\n" + example["input"]
    return [{"role": "user", "content": prompt},
            {"role": "assistant", "content": response}]


def tokenize(example, tokenizer):
    """(prompt ids, all ids) of one example: the tokens before the
    response, and the whole conversation's."""
    tok = _fast(tokenizer)
    messages = _messages(example)
    if getattr(tok, "chat_template", None):
        full = list(tok.apply_chat_template(messages, tokenize=True))
        prompt = list(tok.apply_chat_template(messages[:-1], tokenize=True,
                                              add_generation_prompt=True))
        if full[:len(prompt)] != prompt:
            raise ValueError("the chat template renders the prompt "
                             "differently alone and before its response; "
                             "its response cannot be told apart")
        return prompt, full
    text = "\n".join(m["content"] for m in messages[:-1])
    prompt = list(tok(text, add_special_tokens=True)["input_ids"])
    response = list(tok(messages[-1]["content"],
                        add_special_tokens=False)["input_ids"])
    eos = tok.eos_token_id
    return prompt, prompt + response + ([eos] if eos is not None else [])


def sft_rows(examples, tokenizer, seq, pad_id=None):
    """Rows [N, seq + 1] of token ids (int64) and their labels (the ids
    where they are in the loss, -100 elsewhere) for strata-run's --data and
    --labels, or strata.Trainer batches (ids = rows[:, :seq], labels =
    labels[:, 1:]). Returns (rows, labels, stats): stats counts the
    examples cut at seq + 1 tokens and the labels in the loss."""
    tok = _fast(tokenizer)
    pad_id = _pad(tok, pad_id)
    examples = list(examples)
    rows = np.full((len(examples), seq + 1), pad_id, dtype=np.int64)
    labels = np.full((len(examples), seq + 1), IGNORE, dtype=np.int64)
    cut = 0
    for i, example in enumerate(examples):
        prompt, full = tokenize(example, tok)
        if len(full) > seq + 1:
            cut += 1
            full = full[:seq + 1]
        rows[i, :len(full)] = full
        labels[i, len(prompt):len(full)] = full[len(prompt):]
    stats = {"examples": len(examples), "cut": cut,
             "labels": int((labels[:, 1:] >= 0).sum())}
    if stats["labels"] == 0:
        raise ValueError("no response token fits in %d tokens: every label "
                         "is ignored" % (seq + 1))
    return rows, labels, stats


def pack_rows(examples, tokenizer, seq, pad_id=None):
    """Examples packed into rows of seq + 1 tokens, in order (an example
    that does not fit in what is left of a row starts the next; one longer
    than a row is cut and has a row of its own). Returns (rows, labels,
    segments, stats): segments numbers the examples of a row from 0
    (padding: PAD_SEGMENT); each example's first label is ignored too, so
    nothing is predicted across a boundary. For a model exported with
    strata.hf.export(..., packing=True)."""
    tok = _fast(tokenizer)
    pad_id = _pad(tok, pad_id)
    width = seq + 1
    packed, current, used, cut = [], [], 0, 0
    for example in examples:
        prompt, full = tokenize(example, tok)
        if len(full) > width:
            cut += 1
            full = full[:width]
        if current and used + len(full) > width:
            packed.append(current)
            current, used = [], 0
        current.append((len(prompt), full))
        used += len(full)
    if current:
        packed.append(current)
    n = len(packed)
    rows = np.full((n, width), pad_id, dtype=np.int64)
    labels = np.full((n, width), IGNORE, dtype=np.int64)
    segments = np.full((n, width), PAD_SEGMENT, dtype=np.int64)
    for r, row in enumerate(packed):
        at = 0
        for k, (prompt, full) in enumerate(row):
            end = at + len(full)
            rows[r, at:end] = full
            segments[r, at:end] = k
            first = max(prompt, 1)
            labels[r, at + first:end] = full[first:]
            at = end
    stats = {"examples": sum(len(r) for r in packed), "rows": n, "cut": cut,
             "labels": int((labels[:, 1:] >= 0).sum()),
             "fill": float((segments != PAD_SEGMENT).mean()) if n else 0.0}
    if stats["labels"] == 0:
        raise ValueError("no response token fits in %d tokens: every label "
                         "is ignored" % width)
    return rows, labels, segments, stats


def positions(segments):
    """Position ids of packed rows: each segment counts from 0 (padding
    too, as one more segment)."""
    segments = np.asarray(segments)
    t = np.arange(segments.shape[1])
    # Each position's distance from where its run of one segment began.
    change = np.ones(segments.shape, dtype=bool)
    change[:, 1:] = segments[:, 1:] != segments[:, :-1]
    start = np.maximum.accumulate(np.where(change, t, 0), axis=1)
    return (t - start).astype(np.int64)


def batch(rows, labels, segments=None):
    """strata.Trainer's inputs for rows [B, T + 1]: input_ids (tokens
    0..T-1), labels (1..T), and for packed rows position_ids and
    segment_ids."""
    rows, labels = np.asarray(rows), np.asarray(labels)
    t = rows.shape[1] - 1
    out = {"input_ids": rows[:, :t], "labels": labels[:, 1:]}
    if segments is not None:
        segments = np.asarray(segments)
        out["position_ids"] = positions(segments)[:, :t]
        out["segment_ids"] = segments[:, :t]
    return out

"""Supervised fine-tuning data: examples in, token rows and labels out.

    import numpy as np, strata.data
    examples = strata.data.load("train.jsonl")      # JSONL or Parquet
    rows, labels, stats = strata.data.sft_rows(examples, tokenizer, seq=512)
    np.save("rows.npy", rows); np.save("labels.npy", labels)
    #   strata-run model.strata --data rows.npy --labels labels.npy \\
    #     --epochs 2 --shuffle 0 --eval-data held.npy --eval-labels ...

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

__all__ = ["IGNORE", "load", "tokenize", "sft_rows"]

IGNORE = -100


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
    if pad_id is None:
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else \
            tok.eos_token_id
    if pad_id is None:
        raise ValueError("the tokenizer has no pad or end-of-text token: "
                         "give pad_id")
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

# Batch invariance of foilforge/lm.py's canonical pass on a GPU, standalone (torch and transformers only: the
# device machine has no foilforge dependencies). A model of SmolLM2-135M's shape with drawn weights; random texts
# of one token length. A text's summed log-probability and its mean-pooled last layer (per row, as lm.py pools)
# at a fixed row count (batching.ACCELERATOR_ROWS = 64) with other companions and at other places, against other
# row counts. Prints one JSON line; benchmarks/results/pass_store.json keeps it under "accelerator".
import json, random, torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
c = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)
out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
R = 64
for dt in ("float32", "bfloat16"):
    m = LlamaForCausalLM(c).to("cuda", getattr(torch, dt)).eval()
    for L in (12, 21):
        T = torch.randint(0, 49152, (300, L), generator=torch.Generator().manual_seed(L))
        def run(rows, n):
            with torch.inference_mode():
                x = rows.cuda(); o = m(input_ids=x, output_hidden_states=True)
                lg = o.logits[:, :-1].float()
                lp = (lg.gather(-1, x[:, 1:, None])[..., 0] - lg.logsumexp(-1)).sum(-1)[:n].cpu()
                h = torch.stack([o.hidden_states[-1][r, 1:].clone().float().mean(0) for r in range(n)]).cpu()
            return lp, h
        ref = run(T[:R], R)
        rng = random.Random(L); eq = {"fixed_rows": 0, "fixed_rows_h": 0}; k = 0
        for t in range(20):
            comp = rng.sample(range(R, 300), R); p = rng.randrange(R); comp[p] = t
            lp, h = run(T[comp], R); k += 1
            eq["fixed_rows"] += bool(lp[p] == ref[0][t]); eq["fixed_rows_h"] += bool(torch.equal(h[p], ref[1][t]))
        for B in (1, 7, 33):
            lp, h = zip(*[run(T[s:s + B], B) for s in range(0, 20, B)])
            lp, h = torch.cat(lp)[:20], torch.cat(h)[:20]
            eq[f"rows_{B}"] = int((lp == ref[0][:20]).sum()); eq[f"rows_{B}_h"] = int((h == ref[1][:20]).all(1).sum())
        out[f"{dt}_len{L}_of20"] = eq
print(json.dumps(out))

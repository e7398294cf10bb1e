"""One-off: where does jaxgpt's record step spend its time on one GPU? (not committed)"""
import functools, time
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from jaxgpt import config as cfg, train, attention, muon, masks

def bench(fn, *args, n=5):
    out = fn(*args); jax.block_until_ready(out)
    times = []
    for _ in range(n):
        t = time.perf_counter(); out = fn(*args); jax.block_until_ready(out); times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))

preset = cfg.get_preset("record")
preset = cfg.replace(preset, train=cfg.replace(preset.train, devices=1, batch_tokens=65536)) if hasattr(cfg, "replace") else preset
mesh = Mesh(np.array(jax.devices()[:1]), (train.AXIS,))
preset, graph, host = train.build_model(preset, train.RunOptions(), num_devices=1)
opt = train.make_optimizer(preset)
steps = train.compile_steps(mesh, graph, opt)
params = train.replicate(host, steps.replicated)
opt_state = jax.jit(opt.init, out_shardings=steps.replicated)(params)
rng = np.random.default_rng(0)
toks = rng.integers(0, 50256, size=(1, 65537)).astype(np.int32)
toks[0, rng.choice(65537, 64, replace=False)] = 50256  # ~1000-token documents
inputs, targets = jax.device_put(toks[:, :-1], steps.batch), jax.device_put(toks[:, 1:], steps.batch)
train_jit = jax.jit(steps.train)  # no donation for repeated timing
for w in (1, 14):
    print(f"full step W={w}: {bench(train_jit, params, opt_state, inputs, targets, np.int32(w)):.1f} ms", flush=True)
gfn = jax.jit(jax.value_and_grad(lambda p, i, t, w: graph.bind(p)(i, t, w, train=True)))
p1 = jax.tree.map(lambda x: jax.device_put(x, jax.devices()[0]), params)
i1, t1 = jax.device_put(toks[:, :-1]), jax.device_put(toks[:, 1:])
for w in (1, 14):
    print(f"loss+grad W={w}: {bench(gfn, p1, i1, t1, np.int32(w)):.1f} ms", flush=True)
ffn = jax.jit(lambda p, i, t, w: graph.bind(p)(i, t, w, train=True))
print(f"loss fwd W=14: {bench(ffn, p1, i1, t1, np.int32(14)):.1f} ms", flush=True)
q = jax.random.normal(jax.random.key(0), (1, 65536, 6, 128), jnp.bfloat16)
ids = masks.document_ids(jnp.asarray(toks[0, :-1]))[None]
for w in (1, 14):
    att = jax.jit(jax.value_and_grad(lambda q, k, v, w: attention.attention(q, k, v, ids, w).astype(jnp.float32).sum(), argnums=(0, 1, 2)))
    print(f"blocked attention fwd+bwd W={w}: {bench(att, q, q, q, np.int32(w)):.1f} ms", flush=True)
    attf = jax.jit(lambda q, k, v, w: attention.attention(q, k, v, ids, w))
    print(f"blocked attention fwd W={w}: {bench(attf, q, q, q, np.int32(w)):.1f} ms", flush=True)
mats = {"qkvo (12x4x768x768)": jnp.ones((48, 768, 768), jnp.float32), "mlp (24x768x3072)": jnp.ones((24, 768, 3072), jnp.float32)}
for name, g in mats.items():
    ns = jax.jit(lambda g: muon.newton_schulz(g))
    print(f"newton_schulz {name}: {bench(ns, g):.1f} ms", flush=True)

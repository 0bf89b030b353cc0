"""Online RL with TRL's GRPOTrainer: groups of sampled answers per prompt, exact-match reward on
the final `#### N` against the train split's gold answer."""
import argparse
import json
import os
import time

from common import (exact_match_reward, load_train, lora_config, rl_dataset, save_full_model, setup_threads,
                    trainer_device)
from metrics_callback import MetricsFileCallback, StopAt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="a saved model folder (TRL rebuilds the KL reference from it)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "data"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step")
    ap.add_argument("--gens", type=int, default=8, help="group size: sampled completions per prompt")
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--beta", type=float, default=0.04, help="KL coefficient")
    ap.add_argument("--max_completion", type=int, default=24)
    ap.add_argument("--n_train", type=int, default=4000, help="prompts taken from the end of the train split")
    ap.add_argument("--lora", type=int, default=0, help="LoRA rank (0: full fine-tuning)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stop_at", type=float, default=0.0)
    a = ap.parse_args()
    setup_threads()
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    t0 = time.time()
    items = load_train(a.data)[-a.n_train:]
    tok = AutoTokenizer.from_pretrained(a.model)
    device_args, device = trainer_device()
    cfg = GRPOConfig(
        output_dir=os.path.join("logs", "grpo_trainer"), max_steps=a.steps,
        per_device_train_batch_size=a.prompts * a.gens, num_generations=a.gens,
        max_completion_length=a.max_completion, temperature=1.0, learning_rate=a.lr * (4 if a.lora else 1),
        lr_scheduler_type="constant_with_warmup", warmup_steps=max(1, a.steps // 20), beta=a.beta,
        logging_steps=max(1, a.steps // 20), save_strategy="no", report_to="none", gradient_checkpointing=False,
        dataloader_num_workers=0, seed=a.seed, disable_tqdm=True, **device_args,
        log_completions=False, use_vllm=False)
    stop = StopAt(a.stop_at)
    trainer = GRPOTrainer(model=a.model, reward_funcs=exact_match_reward, args=cfg, train_dataset=rl_dataset(items),
                          processing_class=tok, peft_config=lora_config(a.lora) if a.lora else None,
                          callbacks=[MetricsFileCallback("grpo"), stop])
    t1 = time.time()
    trainer.train()
    train_s = time.time() - t1
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    save_full_model(trainer, tok, a.out, a.lora)
    print(json.dumps({"stage": "grpo", "device": device, "steps": trainer.state.global_step,
                      "stopped_early": stop.stopped_early,
                      "train_s": round(train_s, 1), "total_s": round(time.time() - t0, 1), "out": a.out,
                      "first_reward": rewards[0] if rewards else None,
                      "last_reward": rewards[-1] if rewards else None}), flush=True)


if __name__ == "__main__":
    main()

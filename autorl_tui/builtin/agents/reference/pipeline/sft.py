"""Supervised fine-tuning with TRL's SFTTrainer on the train split's demonstrations.
Prompt/completion chat data, so the loss is on the assistant's reply only."""
import argparse
import json
import os
import time

from common import load_train, lora_config, save_full_model, setup_threads, sft_dataset, trainer_device
from metrics_callback import MetricsFileCallback, StopAt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "data"))
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--n_train", type=int, default=4000)
    ap.add_argument("--teacher_share", type=float, default=0.75)
    ap.add_argument("--lora", type=int, default=0, help="LoRA rank (0: full fine-tuning)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stop_at", type=float, default=0.0, help="epoch seconds: stop training and save")
    a = ap.parse_args()
    setup_threads()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    t0 = time.time()
    items = load_train(a.data)[: a.n_train]
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model)
    device_args, device = trainer_device()
    cfg = SFTConfig(
        output_dir=os.path.join("logs", "sft_trainer"), max_steps=a.steps, per_device_train_batch_size=a.batch,
        learning_rate=a.lr * (2 if a.lora else 1), lr_scheduler_type="cosine", warmup_steps=max(1, a.steps // 20),
        logging_steps=max(1, a.steps // 20), save_strategy="no", report_to="none", gradient_checkpointing=False,
        dataloader_num_workers=0, max_length=128, seed=a.seed, disable_tqdm=True, **device_args)
    stop = StopAt(a.stop_at)
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=sft_dataset(items, a.seed, a.teacher_share),
                         processing_class=tok, peft_config=lora_config(a.lora) if a.lora else None,
                         callbacks=[MetricsFileCallback("sft"), stop])
    t1 = time.time()
    trainer.train()
    train_s = time.time() - t1
    save_full_model(trainer, tok, a.out, a.lora)
    print(json.dumps({"stage": "sft", "device": device, "steps": trainer.state.global_step,
                      "stopped_early": stop.stopped_early,
                      "train_s": round(train_s, 1), "total_s": round(time.time() - t0, 1), "out": a.out}), flush=True)


if __name__ == "__main__":
    main()

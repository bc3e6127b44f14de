#!/usr/bin/env bash
# GRPO on GridSim with SkyRL: docs/training-skyrl.md, "Train with GRPO".
#
# Before it, from the repository root:
#   agentenv serve examples/gridsim                      # another terminal (see "Serve the bundle")
#   agentenv skyrl rows http://127.0.0.1:8200 data \
#     --tokenizer Qwen/Qwen3-4B --max-prompt-length 3072 \
#     --chat-template-kwargs '{"enable_thinking": false}'
# and a warm-started model in ./qwen3-4b-gridsim-sft ("Warm start").
#
# Run it in SkyRL's environment (agentenv_skyrl installed there) from the
# folder holding qwen3-4b-gridsim-sft and data/, on one GPU that the trainer
# and vLLM share:
#   bash examples/gridsim/skyrl_gridsim.sh [more SkyRL overrides...]
# e.g. PYTHON=SkyRL/.venv/bin/python, or trainer.logger=console.
#
# The settings the agentenv env needs (the rest are the run's choices):
#
# | setting                               | here                   | without it                                                                                   |
# |---------------------------------------|------------------------|----------------------------------------------------------------------------------------------|
# | generator.batched                     | false                  | SkyRL's batched generation plays one turn without the env's steps; AgentEnvGenerator refuses |
# | generator.max_turns                   | 4                      | SkyRL's default of 1 ends every episode after the model's first reply                        |
# | environment.skyrl_gym.max_env_workers | 64                     | SkyRL's env threads, so the rollouts that play at once; match --max-concurrent-envs          |
# | generator.chat_template_kwargs        | enable_thinking: false | the same settings the rows were written with (--chat-template-kwargs)                        |
# | generator.max_input_length            | 8192                   | the context a rollout may grow to; SkyRL ends one past it, and it scores 0                   |
# | trainer.max_prompt_length             | 3072                   | over the rows' longest prompt (the writer says it); SkyRL's filter drops a longer row        |
set -euo pipefail

PYTHON="${PYTHON:-python}"
MODEL="${MODEL:-qwen3-4b-gridsim-sft}"
DATA_DIR="${DATA_DIR:-data}"

exec "$PYTHON" -m agentenv_skyrl.train \
  data.train_data="['$DATA_DIR/train.parquet']" \
  data.val_data="['$DATA_DIR/eval.parquet']" \
  environment.env_class=agentenv \
  environment.skyrl_gym.max_env_workers=64 \
  generator.batched=false \
  generator.max_turns=4 \
  generator.chat_template_kwargs.enable_thinking=false \
  generator.max_input_length=8192 \
  trainer.max_prompt_length=3072 \
  generator.sampling_params.max_generate_length=1024 \
  generator.inference_engine.engine_init_kwargs.max_model_len=9216 \
  generator.sampling_params.temperature=1.1 \
  generator.eval_sampling_params.temperature=1.1 \
  generator.n_samples_per_prompt=8 \
  generator.eval_n_samples_per_prompt=1 \
  trainer.algorithm.advantage_estimator=grpo \
  trainer.policy.model.path="$MODEL" \
  trainer.policy.model.lora.rank=32 \
  trainer.policy.model.lora.alpha=64 \
  trainer.policy.model.lora.target_modules=all-linear \
  trainer.policy.optimizer_config.lr=2.0e-5 \
  trainer.policy.optimizer_config.scheduler=cosine \
  trainer.policy.optimizer_config.num_warmup_steps=3 \
  trainer.train_batch_size=4 \
  trainer.policy_mini_batch_size=4 \
  trainer.max_training_steps=40 \
  trainer.eval_before_train=true \
  trainer.eval_interval=20 \
  trainer.eval_batch_size=200 \
  trainer.strategy=fsdp \
  trainer.placement.colocate_all=true \
  trainer.placement.policy_num_gpus_per_node=1 \
  trainer.placement.ref_num_gpus_per_node=1 \
  generator.inference_engine.num_engines=1 \
  generator.inference_engine.tensor_parallel_size=1 \
  generator.inference_engine.backend=vllm \
  generator.inference_engine.run_engines_locally=true \
  generator.inference_engine.gpu_memory_utilization=0.6 \
  trainer.micro_forward_batch_size_per_gpu=4 \
  trainer.micro_train_batch_size_per_gpu=4 \
  trainer.project_name=agentenv-gridsim \
  trainer.run_name=qwen3-4b-gridsim-grpo \
  trainer.ckpt_interval=20 \
  trainer.ckpt_path="$PWD/ckpts/qwen3-4b-gridsim-grpo" \
  "$@"

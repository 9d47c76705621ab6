"""The engine (nano-vllm's core): request and sequence state, the scheduler, KV blocks and recurrent slots, the stage
kinds, worker threads, the pipeline and the decode graphs. It never imports a layer, a component or a family."""

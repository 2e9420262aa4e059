"""The classic surface as data: what environments written for verifiers 0.1.x to 0.3.x import
and call, and this SDK serves. Frozen: change an entry and someone's published environment breaks.

``IMPORT_PATHS`` holds every ``verifiers.*`` module path of a classic release (upstream's tags
0.1.2, the first tagged, to 0.3.0) that this SDK serves, with the names a classic release defined
there and this SDK serves too (``verifiers`` itself: ``vf.__all__``, exactly). ``SIGNATURES`` holds
the parameters environments pass by name to the constructors and functions they call. Read by
``tests/classic/test_classic_surface.py`` (every path imports, every name resolves, every parameter is
accepted) and rendered into docs/environments.md by ``scripts/classic_surface.py``.

Classic paths this SDK does not serve (upstream's harness environments, GEPA, the RL trainers,
``verifiers.utils`` modules of the CLI and the hub) are not listed: importing one fails.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImportPath:
    """A module path environments import from, and the names they may import from it."""

    module: str
    since: str  # the first classic release that had this module path
    names: tuple[str, ...]


@dataclass(frozen=True)
class Signature:
    """Parameters environments pass by name to ``module.qualname``; ``var_keyword``: it also
    takes ``**kwargs`` (the classic releases' other keywords, each handled or ignored)."""

    module: str
    qualname: str
    parameters: tuple[str, ...]
    var_keyword: bool = False


TOP_LEVEL = "verifiers"

# one name after another, not one a line:
# fmt: off
IMPORT_PATHS: tuple[ImportPath, ...] = (
    ImportPath("verifiers", "0.1.2", (
        "AnthropicMessagesClient", "AssistantMessage", "BOXED_SYSTEM_PROMPT", "BrowserSandboxError",
        "ChatMessage", "ChatMessages", "Client", "ClientConfig", "DatasetBuilder", "DatasetError",
        "EmptyModelResponseError", "EndpointConfig", "Endpoints", "EnvGroup", "EnvGroupRubric",
        "Environment", "EnvironmentNotFoundError", "Error", "ErrorData", "GenerateMetadata",
        "GenerateOutputs", "GroupRewardFunc", "GymEnv", "ImageUrlContentPart", "Info", "InfraError",
        "InputAudioContentPart", "InvalidModelResponseError", "JudgeRubric", "MCPEnv", "MathRubric",
        "MaybeThinkParser", "Message", "MessageType", "Messages", "MissingKeyError", "ModelClient",
        "ModelError", "ModelResponse", "MultiTurnEnv", "OpenAIChatCompletionsClient",
        "OpenAICompatibleClient", "OpenAICompletionsClient", "OpenAIResponsesClient",
        "OverlongPromptError", "Parser", "ProcessedOutputs", "PythonEnv", "ReasoningGymEnv",
        "Response", "ResponseMessage", "ResponseTokens", "RetryPolicy", "RewardFunc",
        "RolloutError", "RolloutInput", "RolloutOutput", "RolloutScore", "RolloutScores",
        "RolloutTiming", "Rubric", "RubricGroup", "SamplingArgs", "SandboxEnv", "SandboxError",
        "SingleTurnEnv", "State", "StatefulToolEnv", "SystemMessage", "THINK_BOXED_SYSTEM_PROMPT",
        "TextArenaEnv", "TextContentPart", "TextMessage", "ThinkParser", "TimeSpan", "TimeSpans",
        "TokenUsage", "Tool", "ToolCall", "ToolCallError", "ToolEnv", "ToolError", "ToolMessage",
        "ToolParseError", "ToolRubric", "TrajectoryStep", "TrajectoryStepTokens", "TunnelError",
        "Usage", "UserMessage", "VFError", "XMLParser", "advantage", "cleanup", "ensure_keys",
        "extract_boxed_answer", "extract_hash_answer", "group_reward_func", "load_environment",
        "load_example_dataset", "log_level", "metric", "print_prompt_completions_sample",
        "quiet_verifiers", "reward", "setup", "setup_logging", "stop", "teardown", "update",
        "written_for",
    )),
    ImportPath("verifiers.clients", "0.1.11", (
        "AnthropicMessagesClient", "Client", "ClientConfig", "OpenAIChatCompletionsClient",
        "OpenAICompletionsClient", "OpenAIResponsesClient", "resolve_client",
    )),
    ImportPath("verifiers.clients.anthropic_messages_client", "0.1.11", (
        "AnthropicMessagesClient",
    )),
    ImportPath("verifiers.clients.client", "0.1.11", ("Client",)),
    ImportPath("verifiers.clients.openai_chat_completions_client", "0.1.11", (
        "OpenAIChatCompletionsClient",
    )),
    ImportPath("verifiers.clients.openai_completions_client", "0.1.11", (
        "OpenAICompletionsClient",
    )),
    ImportPath("verifiers.clients.openai_responses_client", "0.1.14", ("OpenAIResponsesClient",)),
    ImportPath("verifiers.decorators", "0.1.9", (
        "SignalStage", "advantage", "cleanup", "discover_decorated", "metric", "reward", "setup",
        "stop", "teardown", "update",
    )),
    ImportPath("verifiers.envs", "0.1.2", ("experimental", "integrations")),
    ImportPath("verifiers.envs.env_group", "0.1.2", (
        "ENV_GROUP_INFO_KEY", "EnvGroup", "EnvGroupRubric",
    )),
    ImportPath("verifiers.envs.environment", "0.1.2", ("Environment",)),
    ImportPath("verifiers.envs.experimental", "0.1.9", ()),
    ImportPath("verifiers.envs.experimental.gym_env", "0.1.9", (
        "EpisodicSumRubric", "GymEnv", "StepResetEnv", "normalize_reset", "normalize_step",
        "sum_step_rewards",
    )),
    ImportPath("verifiers.envs.experimental.mcp_env", "0.1.9", (
        "MCPEnv", "MCPServerConfig", "MCPServerConnection", "MCPToolWrapper",
    )),
    ImportPath("verifiers.envs.integrations", "0.1.9", ()),
    ImportPath("verifiers.envs.integrations.textarena_env", "0.1.9", ("TextArenaEnv",)),
    ImportPath("verifiers.envs.multiturn_env", "0.1.2", (
        "MultiTurnEnv", "MultiTurnMonitorRubric",
    )),
    ImportPath("verifiers.envs.python_env", "0.1.5", ("PythonEnv",)),
    ImportPath("verifiers.envs.reasoninggym_env", "0.1.7", ("ReasoningGymEnv",)),
    ImportPath("verifiers.envs.sandbox_env", "0.1.5", ("SandboxEnv", "SandboxState")),
    ImportPath("verifiers.envs.singleturn_env", "0.1.2", ("SingleTurnEnv",)),
    ImportPath("verifiers.envs.stateful_tool_env", "0.1.3", ("StatefulToolEnv",)),
    ImportPath("verifiers.envs.textarena_env", "0.1.2", ("TextArenaEnv",)),
    ImportPath("verifiers.envs.tool_env", "0.1.2", ("ToolEnv", "ToolMonitorRubric")),
    ImportPath("verifiers.errors", "0.1.9", (
        "BrowserSandboxError", "EmptyModelResponseError", "Error", "InfraError",
        "InvalidModelResponseError", "ModelError", "OverlongPromptError", "SandboxError",
        "ToolCallError", "ToolError", "ToolParseError", "TunnelError",
    )),
    ImportPath("verifiers.parsers", "0.1.2", ()),
    ImportPath("verifiers.parsers.maybe_think_parser", "0.1.7", ("MaybeThinkParser",)),
    ImportPath("verifiers.parsers.parser", "0.1.2", ("Parser",)),
    ImportPath("verifiers.parsers.think_parser", "0.1.2", ("ThinkParser",)),
    ImportPath("verifiers.parsers.xml_parser", "0.1.2", ("XMLParser",)),
    ImportPath("verifiers.rubrics", "0.1.2", ()),
    ImportPath("verifiers.rubrics.judge_rubric", "0.1.2", ("DEFAULT_JUDGE_PROMPT", "JudgeRubric")),
    ImportPath("verifiers.rubrics.math_rubric", "0.1.2", ("MathRubric", "verify_response")),
    ImportPath("verifiers.rubrics.rubric", "0.1.2", ("Rubric",)),
    ImportPath("verifiers.rubrics.rubric_group", "0.1.2", ("RubricGroup",)),
    ImportPath("verifiers.rubrics.tool_rubric", "0.1.2", ("ToolRubric",)),
    ImportPath("verifiers.types", "0.1.2", (
        "AssistantMessage", "BaseRolloutInput", "ChatMessage", "ChatMessages", "ClientConfig",
        "ClientType", "ContentPart", "CustomBaseModel", "DatasetBuilder", "EndpointApi",
        "EndpointClientConfig", "EndpointConfig", "Endpoints", "ErrorData", "FinishReason",
        "GenerateMetadata", "GenerateOutputs", "GenericContentPart", "GroupRewardFunc",
        "ImageUrlContentPart", "ImageUrlSource", "IndividualRewardFunc", "Info",
        "InputAudioContentPart", "InputAudioSource", "JsonPrimitive", "Message", "MessageContent",
        "MessageType", "Messages", "ModelResponse", "ProcessedOutputs", "Response",
        "ResponseMessage", "ResponseTokens", "RewardFunc", "RolloutInput", "RolloutOutput",
        "RolloutScore", "RolloutScores", "RolloutTiming", "SamplingArgs", "State", "SystemMessage",
        "TASK_INPUT_FIELDS", "TextContentPart", "TextMessage", "TimeSpan", "TimeSpans",
        "TokenUsage", "Tool", "ToolCall", "ToolLike", "ToolMessage", "TrajectoryStep",
        "TrajectoryStepTokens", "Usage", "UserMessage", "VersionInfo",
    )),
    ImportPath("verifiers.utils", "0.1.2", ()),
    ImportPath("verifiers.utils.async_utils", "0.1.3", (
        "NullAsyncContext", "maybe_await", "maybe_call_with_named_args", "maybe_retry",
        "maybe_semaphore", "with_sem",
    )),
    ImportPath("verifiers.utils.client_utils", "0.1.4", (
        "resolve_client_config", "resolve_client_configs",
    )),
    ImportPath("verifiers.utils.config_utils", "0.1.10", ("MissingKeyError", "ensure_keys")),
    ImportPath("verifiers.utils.data_utils", "0.1.2", (
        "BOXED_SYSTEM_PROMPT", "THINK_BOXED_SYSTEM_PROMPT", "extract_boxed_answer",
        "extract_hash_answer", "load_example_dataset", "strip_non_numeric",
    )),
    ImportPath("verifiers.utils.env_utils", "0.1.2", ("load_environment",)),
    ImportPath("verifiers.utils.error_utils", "0.1.9", (
        "ErrorChain", "error_data", "error_data_to_exception", "error_from_data", "get_error_chain",
        "get_vf_error_chain", "is_error_data", "validate_error_data", "vf_error_types",
    )),
    ImportPath("verifiers.utils.eval_utils", "0.1.6", ("make_dataset",)),
    ImportPath("verifiers.utils.logging_utils", "0.1.2", (
        "log_level", "print_prompt_completions_sample", "quiet_verifiers", "setup_logging",
    )),
    ImportPath("verifiers.utils.message_utils", "0.1.3", (
        "concat_messages", "from_raw_message", "get_messages", "maybe_normalize_messages",
        "message_role", "messages_to_printable", "normalize_messages", "sanitize_tool_calls",
        "serialize_messages_for_output", "strip_nones_from_content",
    )),
    ImportPath("verifiers.utils.response_utils", "0.1.8", (
        "parse_is_truncated", "parse_response_message", "parse_response_messages",
        "parse_response_tokens",
    )),
    ImportPath("verifiers.utils.save_utils", "0.1.10", (
        "is_json_serializable", "load_outputs", "make_dataset", "state_to_output",
        "states_to_outputs",
    )),
    ImportPath("verifiers.utils.tool_utils", "0.1.2", (
        "convert_func_to_oai_tool", "convert_func_to_tool_def", "is_valid_tool_content_parts",
    )),
)

SIGNATURES: tuple[Signature, ...] = (
    Signature("verifiers.envs.environment", "Environment.__init__", (
        "dataset", "env_args", "env_id", "eval_dataset", "few_shot", "map_kwargs", "max_seq_len",
        "max_workers", "message_type", "oai_tools", "parser", "pass_threshold", "rubric",
        "sampling_args", "score_rollouts", "system_prompt", "tool_defs",
    ), var_keyword=True),
    Signature("verifiers.envs.multiturn_env", "MultiTurnEnv.__init__", (
        "max_turns", "timeout_seconds",
    ), var_keyword=True),
    Signature("verifiers.envs.singleturn_env", "SingleTurnEnv.__init__", (), var_keyword=True),
    Signature("verifiers.envs.tool_env", "ToolEnv.__init__", (
        "error_formatter", "max_turns", "stop_errors", "tools",
    ), var_keyword=True),
    Signature("verifiers.envs.stateful_tool_env", "StatefulToolEnv.__init__", (
        "max_turns", "tools",
    ), var_keyword=True),
    Signature("verifiers.envs.sandbox_env", "SandboxEnv.__init__", (), var_keyword=True),
    Signature("verifiers.envs.python_env", "PythonEnv.__init__", (), var_keyword=True),
    Signature("verifiers.envs.env_group", "EnvGroup.__init__", (
        "env_names", "envs",
    ), var_keyword=True),
    Signature("verifiers.rubrics.rubric", "Rubric.__init__", (
        "funcs", "parallelize_scoring", "parser", "weights",
    )),
    Signature("verifiers.rubrics.judge_rubric", "JudgeRubric.__init__", (
        "judge_client", "judge_model", "judge_prompt", "judge_sampling_args", "parallelize_scoring",
        "parser",
    ), var_keyword=True),
    Signature("verifiers.rubrics.math_rubric", "MathRubric.__init__", (
        "funcs", "max_verify_chars", "max_workers", "parser", "timeout_seconds", "weights",
    )),
    Signature("verifiers.rubrics.rubric_group", "RubricGroup.__init__", (
        "rubrics",
    ), var_keyword=True),
    Signature("verifiers.rubrics.tool_rubric", "ToolRubric.__init__", ("tools",), var_keyword=True),
    Signature("verifiers.parsers.parser", "Parser.__init__", ("extract_fn",), var_keyword=True),
    Signature("verifiers.parsers.xml_parser", "XMLParser.__init__", (
        "answer_field", "extract_fn", "fields",
    ), var_keyword=True),
    Signature("verifiers.parsers.think_parser", "ThinkParser.__init__", (
        "extract_fn",
    ), var_keyword=True),
    Signature("verifiers.parsers.maybe_think_parser", "MaybeThinkParser.__init__", (
        "extract_fn",
    ), var_keyword=True),
    Signature("verifiers.utils.data_utils", "load_example_dataset", ("n", "name", "seed", "split")),
    Signature("verifiers.utils.data_utils", "extract_boxed_answer", ("strict", "text")),
    Signature("verifiers.utils.data_utils", "extract_hash_answer", ("text",)),
    Signature("verifiers.utils.env_utils", "load_environment", ("env_id",), var_keyword=True),
    Signature("verifiers.envs.environment", "Environment.evaluate", (
        "client", "max_concurrent", "max_concurrent_generation", "max_concurrent_scoring",
        "max_retries", "model", "num_examples", "on_progress", "results_path",
        "rollouts_per_example", "sampling_args", "save_every", "save_results", "shuffle",
        "shuffle_seed", "state_columns",
    ), var_keyword=True),
    Signature("verifiers.envs.environment", "Environment.generate", (
        "client", "inputs", "max_concurrent", "max_concurrent_generation", "max_concurrent_scoring",
        "max_retries", "model", "on_progress", "results_path", "rollouts_per_example",
        "sampling_args", "save_every", "save_results", "score_rollouts", "state_columns",
        "use_tqdm",
    ), var_keyword=True),
    Signature("verifiers.envs.environment", "Environment.get_eval_inputs", (
        "num_examples", "rollouts_per_example",
    )),
    Signature("verifiers.envs.environment", "Environment.get_model_response", (), var_keyword=True),
    Signature("verifiers.envs.multiturn_env", "MultiTurnEnv.env_response", (
        "messages", "state",
    ), var_keyword=True),
    Signature("verifiers.envs.multiturn_env", "MultiTurnEnv.is_completed", (
        "state",
    ), var_keyword=True),
    Signature("verifiers.envs.multiturn_env", "MultiTurnEnv.setup_state", (
        "state",
    ), var_keyword=True),
    Signature("verifiers.rubrics.rubric", "Rubric.add_reward_func", ("func", "weight")),
    Signature("verifiers.parsers.parser", "Parser.parse_answer", ("completion",)),
    Signature("verifiers.utils.async_utils", "maybe_await", ("func",), var_keyword=True),
)
# fmt: on


def import_path(module: str) -> ImportPath:
    """The entry for ``module`` (KeyError when it is not a classic path)."""
    for entry in IMPORT_PATHS:
        if entry.module == module:
            return entry
    raise KeyError(module)


def top_level_names() -> tuple[str, ...]:
    """The names of ``import verifiers as vf``: ``vf.__all__`` is exactly these."""
    return import_path(TOP_LEVEL).names


def rooms() -> tuple[str, ...]:
    """The rooms of ``verifiers/`` that classic paths live in (``envs``, ``types``, ...;
    ``__init__`` for the package itself): each is marked *contract* in docs/architecture.md."""
    found = {e.module.split(".")[1] if "." in e.module else "__init__" for e in IMPORT_PATHS}
    return tuple(sorted(found))

"""failclosed.model: the agent-run queue as pure transitions (one semantics for everything).

``enabled(world)`` lists every enabled transition; ``apply(world, t)`` returns the next world.
Both are pure: no clock, no randomness, no I/O.
"""

from .config import ConfigError, initial_world, load_world, parse_config, read_toml
from .constants import Constants
from .policy import PRESET_ORDER, PRESETS, SWITCHES, Policy, UnknownPolicy, parse_policy, preset
from .runtime import GuardFailed, apply, enabled, fire, successors
from .state import Application, Config, Event, Message, Proc, Row, RunSpec, Tool, World
from .steps import fault_kinds
from .transition import Transition

__all__ = [
    "Application", "ConfigError", "Constants", "Event", "fault_kinds", "GuardFailed", "Message",
    "PRESETS", "PRESET_ORDER", "Policy", "Proc", "Row", "RunSpec", "SWITCHES", "Config", "Tool",
    "Transition", "UnknownPolicy", "World", "apply", "enabled", "fire", "initial_world",
    "parse_config", "load_world", "parse_policy", "preset", "read_toml", "successors",
]

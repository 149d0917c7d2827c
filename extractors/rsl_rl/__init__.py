"""RSL-RL as a side: what MuJoCo Playground trains with when it runs ``learning/train_rsl_rl.py``
(Playground's ``rsl_rl_config(env_name)``, the script's flag defaults, its torch wrapper) on
rsl-rl-lib's code at a ref (leggedrobotics/rsl_rl), read statically: nothing upstream is
imported or run.

The side's interface (what the report and ``extract rsl-rl`` ask):

* ``families()``, ``environments(family)``, ``family_of(env)``: the Playground families that
  have an RSL-RL config and their registered environments;
* ``family(name)`` and ``env(name)``: one scope's :class:`~brax_diff.facts.model.Extraction`;
* ``variant_for(family, env)``, ``variant(name)``, ``setup(name, env)``: the same, in the
  terms the report uses for the side it compares Brax with (a "variant" is a family or an
  environment: RSL-RL has no variants of its own).
"""

from __future__ import annotations

import difflib

from brax_diff.errors import BraxDiffError
from brax_diff.facts.model import Extraction, Finding
from brax_diff.facts.vocabulary import PER_ENVIRONMENT

from ..playground.params import registered_envs
from ..playground.env import EnvConfigs
from .facts import Facts
from .library import Library
from .params import FAMILY_PARAMS, PARAMS_FUNCTION, Config, ParamsFunction
from .script import TrainScript, Wrapper
from .sections import model_sections

SIDE = "rsl_rl"
# rsl-rl-lib's ref when none is given: the release Playground's uv.lock pins at the Playground
# ref compared (brax_diff.session.pinned_rsl_rl_ref; 3.2.0 at Playground main), what its
# train_rsl_rl.py is installed with. pyproject.toml alone allows any `rsl-rl-lib>=3.0.0`, 4.x
# included, whose runners no longer read the `policy` config the script passes.
FAMILIES = tuple(FAMILY_PARAMS)  # the Playground families with an rsl_rl_config


class RslRlExtractor:
    """Canonical facts for RSL-RL PPO at one rsl_rl commit and one Playground commit."""

    def __init__(self, rsl_rl, playground) -> None:
        if playground is None:
            raise BraxDiffError("the RSL-RL side reads Playground's configs: give --playground-repo")
        self.rsl_rl, self.playground = rsl_rl, playground
        self._library: Library | None = None
        self._script: TrainScript | None = None
        self._wrapper: Wrapper | None = None
        self._params: dict[str, ParamsFunction] = {}
        self._envs: dict[str, list[str]] = {}
        self._env_configs: EnvConfigs | None = None

    # -- names -------------------------------------------------------------------------
    def families(self) -> list[str]:
        return list(FAMILIES)

    def environments(self, family: str) -> list[str]:
        if family not in FAMILY_PARAMS:
            raise BraxDiffError(f"RSL-RL has no Playground config for family {family!r} "
                                f"(families: {', '.join(FAMILIES)})")
        if family not in self._envs:
            self._envs[family] = registered_envs(self.playground, family)
        return list(self._envs[family])

    def family_of(self, env: str) -> str:
        for family in FAMILIES:
            if env in self.environments(family):
                return family
        known = [e for f in FAMILIES for e in self.environments(f)]
        close = difflib.get_close_matches(env, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise BraxDiffError(f"{env!r} is not a registered Playground environment of a family RSL-RL trains "
                            f"({', '.join(FAMILIES)}){hint}")

    # -- scopes ------------------------------------------------------------------------
    def family(self, family: str) -> Extraction:
        self.environments(family)  # an unknown family is one error line
        return self._extract(family, None)

    def env(self, env: str) -> Extraction:
        return self._extract(self.family_of(env), env)

    def variant_for(self, family: str | None = None, env: str | None = None) -> str:
        return env or family

    def variant(self, name: str) -> Extraction:
        return self.family(name) if name in FAMILY_PARAMS else self.env(name)

    def setup(self, name: str, env: str | None) -> Extraction:
        """The environment's training setup (already in its own extraction): ``env``'s scope."""
        source = self.env(env) if env is not None else self.variant(name)
        return Extraction(SIDE, dict(source.sources), {"env": env},
                          {k: f for k, f in source.facts.items() if k in _SETUP_KEYS})

    # -- the parts ---------------------------------------------------------------------
    def _parts(self):
        if self._library is None:
            self._library = Library(self.rsl_rl)
            self._script = TrainScript(self.playground)
            self._wrapper = Wrapper(self.playground)
        return self._library, self._script, self._wrapper

    def _params_of(self, family: str) -> ParamsFunction:
        if family not in self._params:
            self._params[family] = ParamsFunction(self.playground, family, self._configs())
        return self._params[family]

    def _configs(self) -> EnvConfigs:
        """The environments' configs, whose engine also runs ``rsl_rl_config`` (one per commit)."""
        if self._env_configs is None:
            self._env_configs = EnvConfigs(self.playground)
        return self._env_configs

    def _env_field(self, family: str, env: str, name: str):
        found = self._configs().field(family, env, name)
        return found.value, tuple(found.provenance), found.unknown

    def _extract(self, family: str, env: str | None) -> Extraction:
        library, script, wrapper = self._parts()
        params = self._params_of(family)
        scope = {"family": family, "env": env}
        extraction = Extraction(SIDE, {SIDE: self.rsl_rl.info(), "playground": self.playground.info()}, scope)
        # No function: no key of the config is known (rsl-rl-lib's defaults are not what Playground passes).
        config = params.evaluate(env) if params.problem is None else Config(unreadable=params.problem)
        if params.problem is not None:
            extraction.find(Finding("pattern_not_found", "WARNING", params.problem))
        elif config.unreadable is not None:
            extraction.find(Finding("pattern_not_found", "WARNING", f"{params.path}: {config.unreadable}",
                                    (params.where(params.module.line(params.function)),)))
        for where, why in params.undecided(config):
            extraction.find(Finding("undecidable_branch", "WARNING", f"{PARAMS_FUNCTION}: {why}", (where,)))
        if config.rejected is not None:
            extraction.find(Finding("no_config", "ERROR", f"{PARAMS_FUNCTION} raises for {env}",
                                    (config.rejected,)))
        for finding in params.dead_branches(self.environments(family)) + params.unregistered_names(
                self.environments(family)):
            extraction.find(finding)
        if config.unreadable is None and config.rejected is None:
            if config.sections.get("") is None:  # every top-level key of the config is known
                top = {path.split(".")[0] for path in config.settings}
                for finding in model_sections(library, script, top):
                    extraction.find(finding)
            else:
                extraction.find(Finding("pattern_not_found", "WARNING", f"model sections not checked: "
                                        f"{PARAMS_FUNCTION} may hold keys the engine cannot list "
                                        f"({config.sections['']})"))
        return Facts(extraction, params, config, family, env, library, script, wrapper, self._env_field).build()


_SETUP_KEYS = PER_ENVIRONMENT  # what each environment decides

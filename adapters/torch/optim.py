"""PyTorch optimizers: ``torch.optim.Optimizer`` subclasses running the core update rules.

Parameter groups work as in torch: ``SOAP([{"params": weights}, {"params": biases,
"weight_decay": 0.0}], learning_rate=1e-3)``; every group key is a hyper-parameter of the
constructor, with ``learning_rate`` spelled ``"lr"`` (torch's key, which LR schedulers
change). ``add_param_group`` takes the same keys. The per-parameter buffers (momentum, Adam
moments, the epoch-decay reference point, the iterate sum and their counters) live in
``self.state[p]`` in the parameter's compute dtype (float32 for bfloat16/float16
parameters); each group holds the step count (``group["step"]``, a 0-d int64 CPU tensor, as
torch's own optimizers keep theirs), so ``state_dict()`` / ``load_state_dict``
resume exactly, and a state dict of another model fails at load with the mismatch named.

In eager mode a step runs the core rule on the group's parameters as one flat vector cut
into cache-sized tiles (the buffers are views of one flat buffer per kind, updated in place
as torch's own optimizers do: copy ``state_dict()`` to keep a snapshot), with the counters
mirrored on the host, so a step costs a few tensor ops per tile, whether the tile holds 4
parameters or 400, keeps no temporary larger than a tile and reads no device value (a large
tile of whole parameters on the CPU is stepped on the parameters themselves by foreach
operators, bit for bit the same; groups that take the same step, such as PESG's model and
its loss's a, b, share the tiles). Under ``torch.compile`` it runs the core rule per tensor.

float32 parameters on the CPU take torch's fused optimizer kernels, the
ones of ``torch.optim``'s ``fused=True``: after the rule's direction (the clip, and the epoch
decay's ``-ε·θ_ref``), one pass updates the parameter and its slots, weight decay included.
They round each multiply-add once where the core rule rounds the product and the sum apart,
so a float32 step equals the core rule to a few units in the last place (and
``torch.optim``'s fused step bit for bit where the arithmetic is the same); float64 keeps
the core rule's operations, bit for bit, which the cross-framework identity and the
runner's identical numbers rest on.

For a min-max loss (PESG + AUCMLoss, PDSCA + CompositionalAUCLoss) the loss's ``descent``
auxiliaries form one more parameter group (``group["auxiliary"] is True``) and each
``ascent`` one takes the projected ascent after the descent step; the optimizer finds them
by the roles the loss declares.

>>> import torch, xrisk.torch as xr
>>> model = torch.nn.Linear(3, 1)
>>> loss_fn = xr.AUCMLoss()
>>> opt = xr.PESG(model.parameters(), loss_fn, learning_rate=0.1)
>>> len(opt.param_groups), opt.param_groups[1]["auxiliary"]  # the model's, the loss's a, b
(2, True)
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable
from itertools import chain, repeat
from typing import Any, ClassVar, NamedTuple, cast

import torch

import xrisk
from xrisk.adapter_api import check_interval, compose_doc, refuse_foreign_arguments
from xrisk.adapter_api import namespace_of as _namespace
from xrisk.optim import UpdateRule, reset_reference

__all__ = ["XRiskOptimizer", *xrisk.OPTIMIZERS]

Params = Iterable[torch.Tensor] | Iterable[dict[str, Any]] | None
Loss = torch.nn.Module | None


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


class XRiskOptimizer(torch.optim.Optimizer):
    """Base of the torch optimizers: a core :class:`xrisk.optim.UpdateRule` per group.

    Subclasses only fix the constructor (``rule_type`` and its signature); see the module
    docstring for groups, state and min-max losses.
    """

    rule_type: ClassVar[type[UpdateRule]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "rule_type" in cls.__dict__:
            cls.__doc__ = compose_doc(cls.__doc__, cls.rule_type)
            cls.__init__ = refuse_foreign_arguments(cls.__init__)  # type: ignore[method-assign]

    def __init__(self, rule: UpdateRule, params: Params, loss_fn: Loss = None) -> None:
        owner = rule.name
        if params is None:
            raise TypeError(f"{owner}: params is None; torch optimizers need the parameters. "
                            f"Fix: {owner}(model.parameters(), ...).")
        for name in ("learning_rate", "ce_learning_rate"):
            if callable(getattr(rule, name, None)):
                raise TypeError(
                    f"{owner}: {name} is a callable; torch keeps the learning rate as a number "
                    "in param_groups. Fix: pass a number and use a torch.optim.lr_scheduler."
                )
        self.rule = rule
        self.loss_fn = loss_fn
        self._rules: dict[tuple[Any, ...], UpdateRule] = {}
        # group position -> (its parameters, the rule, the flat plans) of the eager path
        self._plans: dict[int, tuple[tuple[torch.Tensor, ...], UpdateRule,
                                     list[_FlatPlan]]] = {}
        # group position -> (its step tensor, that tensor's version, its value): see
        # _host_step
        self._known_steps: dict[int, tuple[torch.Tensor, int, int]] = {}
        # group position -> the LARS plan of its eager step
        self._lars_plans: dict[int, _LarsPlan] = {}
        # Counter slots this optimizer made and knows to be 0 (by id, the tensor kept): the
        # first plans need not read them back from an accelerator (a host sync).
        self._zero_counters: dict[int, torch.Tensor] = {}
        definition = rule.loss_definition
        self._containers = {} if definition is None else _loss_containers(owner, loss_fn,
                                                                          definition)
        config = rule.config()
        self._hyper_names = tuple(n for n in config if n not in ("learning_rate", "loss_fn"))
        defaults = {"lr": rule.learning_rate, **{n: config[n] for n in self._hyper_names},
                    "auxiliary": False}
        super().__init__(params, defaults)
        descent = [name for name, aux in
                   (definition.auxiliaries().items() if definition is not None else ())
                   if aux.role == "descent"]
        if descent:  # one more group; named like the others when they carry names
            named = "param_names" in self.param_groups[0]
            self.add_param_group({"params": [(f"loss_fn.{name}", self._containers[name])
                                             for name in descent] if named else
                                  [self._containers[name] for name in descent]})
            self.param_groups[-1]["auxiliary"] = True

    # -- groups ---------------------------------------------------------------------------
    def _group_rule(self, group: dict[str, Any]) -> UpdateRule:
        """The core rule of ``group``'s hyper-parameters (validated once per distinct set)."""
        key = tuple(map(group.__getitem__, self._hyper_names))
        try:
            rule = self._rules.get(key)
        except TypeError:  # e.g. betas given as a list
            key = tuple(_hashable(value) for value in key)
            rule = self._rules.get(key)
        if rule is None:
            rule = self.rule.replace(**{n: group[n] for n in self._hyper_names})
            self._rules[key] = rule
        return rule

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; its keys are ``params``, ``lr`` and the constructor's hyper-parameters.

        Nothing changes if the group is invalid (unknown key, bad value, a loss auxiliary).
        """
        owner = self.rule.name
        if not isinstance(param_group, dict):
            raise TypeError(f"{owner}: param_group is {type(param_group).__name__}; expected a "
                            "dict with 'params'. Fix: add_param_group({'params': tensors}).")
        group = dict(param_group)
        allowed = ("params", "param_names", "lr", *self._hyper_names)
        unknown = sorted(set(group) - set(allowed))
        if unknown:
            raise TypeError(f"{owner}: unknown parameter-group keys {unknown}; expected keys "
                            f"among {list(allowed)}. Fix: spell the learning rate 'lr' and the "
                            "other hyper-parameters as in the constructor.")
        check_interval(owner, "lr", group.get("lr", self.defaults["lr"]), low=0.0)
        rule = self._group_rule({**self.defaults, **group})
        params = group.get("params")
        params = [params] if isinstance(params, torch.Tensor) else list(params or [])
        ascent = {id(c) for name, c in self._containers.items()
                  if self.rule.loss_definition.auxiliaries()[name].role == "ascent"}
        for item in params:
            tensor = item[1] if isinstance(item, tuple) else item
            if id(tensor) in ascent:
                raise ValueError(
                    f"{owner}: a parameter is the loss's ascent auxiliary, which this optimizer "
                    "updates by its own ascent step. Fix: pass model.parameters() only; the "
                    "loss's auxiliaries are added by the optimizer."
                )
        group["params"] = params
        super().add_param_group(group)
        added = self.param_groups[-1]
        # The step count, shared by the groups: a CPU tensor, so a torch.compile'd step does
        # not specialise (and recompile) on its value.
        first = self.param_groups[0].get("step")
        added["step"] = torch.zeros((), dtype=torch.int64) if first is None else first.clone()
        with torch.no_grad():
            counters = [n for n, spec in rule.slot_specs().items() if spec.scalar and spec.integer]
            for param in added["params"]:
                slots = rule.init_slots(param)
                self.state[param] = {n: v for n, v in slots._asdict().items() if v is not None}
                self._zero_counters.update(
                    (id(self.state[param][n]), self.state[param][n]) for n in counters
                    if n in self.state[param])

    def _auxiliary_group(self) -> dict[str, Any]:
        return next((g for g in self.param_groups if g.get("auxiliary")), self.param_groups[0])

    # -- the step ---------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter with a gradient (then the loss's ascent step)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:  # refuse before anything moves
            for grad in map(_GRAD, group["params"]):
                if grad is not None and grad.is_sparse:
                    raise RuntimeError(f"{self.rule.name}: got a sparse gradient; expected dense "
                                       "gradients. Fix: build embeddings with sparse=False.")
        # Eager: each group's parameters as flat tiles (see _FlatPlan), with the counters on
        # the host. Compiled steps and rules without host counters go per tensor.
        eager = not torch.compiler.is_compiling()
        ascent_rates = None
        auxiliary_group = self._auxiliary_group()
        groups = self.param_groups
        position = 0
        while position < len(groups):
            group = groups[position]
            rule = self._group_rule(group)
            flat = eager and rule.host_counters
            step = group["step"]
            host_step = None
            if flat and type(rule).rates is not _STEPLESS_RATES:
                # Rates that depend on the step (PDSCA's phase) from a Python int: the count
                # lives on the CPU, so no device sync, and Python bools (the kernels'
                # branches) instead of three operators per group; read once, then known
                step = host_step = self._host_step(position, step)
            rates = rule.rates(step, lr=group["lr"], ce_lr=group.get("ce_learning_rate"))
            last = position
            if flat:
                params = group["params"]
                while last + 1 < len(groups) and _steps_alike(rule, group, groups[last + 1],
                                                              self._group_rule):
                    last += 1
                if last > position:  # one plan for them all (PESG's model and a, b)
                    params = [p for joined in groups[position:last + 1] for p in joined["params"]]
                    for stale in range(position + 1, last + 1):
                        self._plans.pop(stale, None)
                self._update_flat(position, params, group["auxiliary"], rule, rates)
            else:
                self._update_each(group["params"], rule, rates, group["auxiliary"], position)
            for stepped in groups[position:last + 1]:
                if stepped is auxiliary_group:
                    ascent_rates = rates
                stepped["step"] += 1
            counted = group["step"]
            if host_step is not None and isinstance(counted, torch.Tensor):  # see _host_step
                self._known_steps[position] = (counted, counted._version, host_step + 1)
            position = last + 1
        if self._containers:
            self._ascend(ascent_rates)
        return loss

    def _host_step(self, position: int, step: Any) -> int:
        """The step count ``step`` of the group at ``position`` as a Python int: read once,
        then known for as long as the tensor is the group's and unchanged (its version
        counter is the one the step's own ``+= 1`` left: ``load_state_dict`` puts in another
        tensor, an in-place write moves the counter), so the step reads no tensor (on an
        accelerator it would be a sync; on the CPU an operator)."""
        known = self._known_steps.get(position)
        if known is not None and known[0] is step and step._version == known[1]:
            return known[2]
        value = int(step)
        if isinstance(step, torch.Tensor):
            self._known_steps[position] = (step, step._version, value)
        return value

    def _update_each(self, params: Iterable[torch.Tensor], rule: UpdateRule, rates: Any,
                     auxiliary: bool, position: int | None = None) -> None:
        """The core rule on each parameter with a gradient (new slot tensors are rebound), or
        its in-place kernel in eager mode (LARS: the group at ``position`` by its
        :class:`_LarsPlan` where one applies)."""
        eager = not torch.compiler.is_compiling()
        if eager:  # LARS: the whole group's norms and steps at once
            params = [p for p in params if p.grad is not None]
            if type(rule).update_param is _LARS_UPDATE and isinstance(rates.lr, int | float):
                params = _lars_fused_step_(rule, params, self.state, rates.lr)
                if position is not None and params:
                    params = self._update_lars(position, params, rule, rates.lr)
            params = _lars_group_step_(rule, params, self.state, rates)
        for param in params:
            if param.grad is None:
                continue
            state = self.state[param]
            if eager and _lars_kernel_applies(rule, param, rates):
                _lars_step_(rule, param.grad, param, state, rates.lr)
                continue
            new_param, slots = rule.update_param(
                param.grad, param, rule.slots_type(**state), rates, auxiliary=auxiliary)
            param.copy_(new_param)
            state.update((n, v) for n, v in slots._asdict().items() if v is not None)

    def _update_flat(self, position: int, params: list[torch.Tensor], auxiliary: bool,
                     rule: UpdateRule, rates: Any) -> None:
        """The core rule once per :class:`_FlatPlan` of the group at ``position`` (see there),
        or of the groups from there that step alike (``params``: all their parameters)."""
        found = self._plans.get(position)
        if found is None or not _plans_match(*found, params, rule, self.state):
            found = self._plans[position] = (
                tuple(params), rule, _make_plans(params, rule, self.state, self._zero_counters))
        plans = found[2]
        rest: list[torch.Tensor] = []
        for plan in plans:
            grads = list(map(_GRAD, plan.params))
            if all(map(operator.is_not, grads, repeat(None))):
                plan.update(rule, rates, auxiliary, grads)
            else:  # the counters part ways: per tensor, new plans next step
                rest.extend(p for p, grad in zip(plan.params, grads) if grad is not None)
        if rest:
            self._update_each(rest, rule, rates, auxiliary)

    def _update_lars(self, position: int, params: list[torch.Tensor], rule: UpdateRule,
                     lr: float) -> list[torch.Tensor]:
        """LARS's step of the group at ``position`` (its parameters with a gradient:
        ``params``) by its :class:`_LarsPlan`, made or remade as needed; returns the
        parameters left to the other paths (all of them where no plan applies)."""
        plan = self._lars_plans.get(position)
        if plan is None or not plan.holds(params, rule, self.state):
            plan = _LarsPlan.make(params, rule, self.state)
            if plan is None:
                self._lars_plans.pop(position, None)
                return params
            self._lars_plans[position] = plan
        plan.step(rule, lr)
        return []

    def _ascend(self, rates: Any) -> None:
        definition = self.rule.loss_definition
        # The containers themselves, no detached views (an operator each): step() runs
        # under no_grad, so nothing computed from them records a graph
        aux = definition.params_type(**self._containers)
        new = self.rule.ascend(aux, rates)
        for name, spec in definition.auxiliaries().items():
            if spec.role == "ascent":
                container, value = self._containers[name], getattr(new, name)
                if value is not container:  # PDSCA's CE phase keeps it: nothing to copy
                    container.copy_(value)
                container.grad = None  # unused (closed-form ascent); zero_grad() does not see it

    # -- LibAUC's schedule hooks ------------------------------------------------------------
    def update_lr(self, decay_factor: float) -> None:
        """Divide the learning rate(s) of every parameter group by ``decay_factor``."""
        factor = check_interval(f"{self.rule.name}.update_lr", "decay_factor", decay_factor,
                              low=0.0, low_open=True,
                              fix="pass decay_factor > 0 (10 divides the learning rate by 10)")
        for group in self.param_groups:
            group["lr"] = group["lr"] / factor
            if group.get("ce_learning_rate") is not None:
                group["ce_learning_rate"] = group["ce_learning_rate"] / factor

    @torch.no_grad()
    def update_regularizer(self, decay_factor: float | None = None) -> None:
        """New epoch-decay stage: each parameter's reference point becomes its average
        iterate since the last call; the learning rates are divided by ``decay_factor``."""
        if decay_factor is not None:
            self.update_lr(decay_factor)
        for group in self.param_groups:
            rule = self._group_rule(group)
            for param in group["params"]:
                state = self.state[param]
                slots = reset_reference(rule.slots_type(**state))
                state.update((n, v) for n, v in slots._asdict().items() if v is not None)

    # -- state dicts ------------------------------------------------------------------------
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict()`` of this optimizer type; a state dict of another model or
        configuration raises (naming the mismatch) before anything changes."""
        owner = self.rule.name
        saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
        fix = (f"Fix: load a state_dict saved by xrisk.torch.{owner} for the same model and "
               "parameter groups.")
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{owner}: the state_dict has {len(saved_groups)} parameter "
                             f"groups; this optimizer has {len(self.param_groups)}. {fix}")
        plan = []
        for position, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            where = f"{owner}: parameter group {position}"
            missing = sorted({"lr", "step", "auxiliary", *self._hyper_names} - set(saved))
            if missing:
                raise ValueError(f"{where} of the state_dict lacks {missing}. {fix}")
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"{where}: the state_dict holds {len(saved['params'])} "
                                 f"parameters; this optimizer {len(group['params'])}. {fix}")
            rule = self.rule.replace(**{n: saved[n] for n in self._hyper_names})
            specs = rule.slot_specs()
            for index, param in zip(saved["params"], group["params"]):
                slots = saved_state.get(index, {})
                if set(slots) != set(specs):
                    raise ValueError(f"{where}: parameter {index} has state {sorted(slots)}; "
                                     f"expected {sorted(specs)}. {fix}")
                for name, spec in specs.items():
                    shape = () if spec.scalar else tuple(param.shape)
                    if tuple(slots[name].shape) != shape:
                        raise ValueError(
                            f"{where}: state {name!r} of parameter {index} has shape "
                            f"{tuple(slots[name].shape)}; the parameter has shape "
                            f"{tuple(param.shape)}: the state_dict comes from another model. "
                            f"{fix}")
                plan.append((param, slots, specs))
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group["step"] = torch.as_tensor(group["step"], dtype=torch.int64).cpu().clone()
        # torch casts floating state to the parameter's dtype; restore int32 counters and the
        # compute dtype (float32 for bfloat16/float16 parameters) from the saved tensors.
        self._zero_counters.clear()  # loaded counters are read when the plans are rebuilt
        for param, slots, specs in plan:
            dtype = torch.float64 if param.dtype == torch.float64 else torch.float32
            self.state[param] = {
                name: torch.as_tensor(slots[name]).to(
                    device=param.device, dtype=torch.int32 if spec.integer else dtype,
                    copy=True)
                for name, spec in specs.items()
            }

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.update(rule=self.rule, loss_fn=self.loss_fn, _rules={}, _plans={}, _lars_plans={},
                     _known_steps={},
                     _zero_counters={},
                     _containers=self._containers, _hyper_names=self._hyper_names)
        return state

    def __repr__(self) -> str:
        return f"xrisk.torch.{self.rule!r} with {len(self.param_groups)} parameter group(s)"


_flatten = torch._utils._flatten_dense_tensors
_unflatten = torch._utils._unflatten_dense_tensors

#: Elements per tile and thread of the eager path (see :class:`_FlatPlan`): the vectors a
#: kernel touches (parameters, gradients, slots, two scratch) stay in each core's cache, so a
#: step reads and writes each of them from memory about once, while the fixed cost of the
#: kernel's ~15 ops per tile stays small against the arithmetic.
TILE = 1 << 16
#: A plan of at most this many elements is one tile on one thread: a second tile would add
#: its operators for little cache gain (at 0.1 M parameters one tile took 0.94x the time of
#: two for SOAP's Adam and SGD; at 0.25 M tiles of :data:`TILE` took 0.85x and 0.74x the
#: time of one tile).
SMALL_PLAN = 2 * TILE


#: Elements from which a tile of several whole members is stepped on the members
#: themselves (see :func:`_on_members`). One thread, SOAP, time on the members / gathered:
#: at 30 k parameters 1.04x (MLP of 10 tensors) and 1.02x (conv net of 36), at 0.1 M 0.77x
#: and 0.81x: the two passes saved count where a step's vectors outgrow the core's cache.
MEMBER_TILE = TILE
#: Average elements per member from which such a tile is stepped on its members where the
#: rule's member step takes more foreach operators than gathering: each costs a dispatch
#: per member, each pass saved one pass over the tile (at 0.1 M parameters, one thread:
#: PESG 0.94x the time of gathering on the MLP, ~10 k elements per tensor; 1.04x on the
#: conv net, ~2.8 k).
MEMBER_SIZE = 6144


def _tile_length(total: int) -> int:
    """Elements per tile of a plan of ``total`` elements: :data:`TILE` on one thread (the
    whole plan up to :data:`SMALL_PLAN`). With several, each op of a tile is a parallel
    region, whose start and join cost little on an idle machine but a scheduler slice each
    when the cores are shared: a tile gives each thread four times :data:`TILE` and a plan
    has about 8 tiles (a few more where members end short of a tile, see :func:`_tiles`),
    so a step has about as many parallel regions as torch.optim's foreach step, and the
    scratch is at most a quarter of the parameters."""
    threads = torch.get_num_threads()
    if threads <= 1:
        return TILE if total > SMALL_PLAN else max(total, 1)
    # a multiple of 64 elements: a tile starts a fused kernel's vectors where the whole
    # tensor's would (its results depend on it, see _on_members)
    return max(4 * TILE * threads, -(-total // 512) * 64)


#: Devices where the tiles are not cut for a core's cache (see :meth:`_FlatPlan._cut_tiles`):
#: a GPU keeps no tile in a cache, and each operator per tile is a kernel launch, so a plan
#: steps its whole members with foreach (multi-tensor) operators, a launch for many tensors.
_ACCELERATORS = ("cuda",)
#: Elements per tile on an accelerator where a step still needs the scratch (a sliced large
#: member, a rule without a fused kernel, float64): the scratch's two vectors stay at most
#: 2 x 4 Mi elements (32 MiB in float32) where a whole plan's would double a large model's
#: memory on the GPU.
ACCELERATOR_TILE = 1 << 22


class _FlatPlan:
    """Parameters of one group updated together, tile by tile, in eager mode.

    The members share dtype, device and counter values. Their float slots are views of one
    flat buffer per slot (``self.state[p]`` holds the views, so ``state_dict`` and the
    per-tensor path see ordinary per-parameter tensors); their counters are 0-d views of one
    int32 vector per counter, mirrored as Python ints (:attr:`UpdateRule.host_counters`).

    A step cuts the members' flat index range into tiles of at most :data:`TILE` elements
    (a slice of a large parameter, or several small ones gathered into scratch by one
    ``_foreach_copy_`` and scattered back by another) and runs the rule's in-place kernel on
    each tile (the core rule itself where there is none, e.g. for bfloat16 parameters
    computed in float32): the same element-wise arithmetic as on the whole vector, bit for
    bit, writing the parameters and the slot buffers in place, with no temporary larger than
    a tile. Anything that rebinds a state entry (``load_state_dict``, ``update_regularizer``,
    a compiled or per-tensor step) breaks the identity :func:`_plans_match` checks, and the
    plans are rebuilt from the state at the next eager step; the parameters themselves are
    read anew at every step.
    """

    def __init__(self, params: list[torch.Tensor], rule: UpdateRule,
                 state: dict[torch.Tensor, dict[str, torch.Tensor]],
                 counters: dict[str, int]) -> None:
        self.params = params
        self.dtype, self.device = params[0].dtype, params[0].device
        self.counters = counters  # Python mirrors of the int32 views
        self.flats: dict[str, torch.Tensor] = {}
        # each counter vector's version counter as the plan left it: a write by anyone else
        # (in place, through a member's view) moves it, and the plan is remade from the state
        self.versions: dict[str, int] = {}
        self.views: list[dict[str, torch.Tensor]] = [{} for _ in params]
        for name in rule.slot_specs():
            members = [state[p][name] for p in params]
            if name in counters:
                flat = torch.stack(members).to(torch.int32)
                pieces = list(flat.unbind())
            else:
                flat = _flatten(members)
                pieces = list(_unflatten(flat, params))
            self.flats[name] = flat
            if name in counters:
                self.versions[name] = flat._version
            for param, views, piece in zip(params, self.views, pieces):
                state[param][name] = views[name] = piece
        # What holds() compares: every member's entries, in the slots' order, are the views
        names = tuple(rule.slot_specs())  # one at least: the host counters
        self.kind = (self.dtype, self.device)
        self.entries = _slot_getter(names)
        self.expected = [view for views in self.views for view in views.values()]
        self.sizes = [p.numel() for p in params]
        self.tiles: list[tuple[int, int, list[tuple[int, int, int]]]] = []
        self.sliced: list[int] = []
        self.whole = False  # one tile of all members (see _cut_tiles)
        self._cut_tiles(whole=False)
        # Allocated at the first step: two tile vectors for the kernels, and two for the
        # values and gradients of the largest tile that gathers several parameters; with
        # them, each tile's views of the buffers (see :meth:`_prepare`).
        self.scratch: torch.Tensor | None = None
        self.gathered: torch.Tensor | None = None
        self.lists = False  # whether some tiles step on their members (see _prepare)
        self.prepared: list[_PreparedTile] = []

    def holds(self, state: dict[torch.Tensor, dict[str, torch.Tensor]]) -> bool:
        """Whether every member keeps the plan's dtype and device (not so after e.g.
        ``model.double()``) and every slot of its state is exactly the plan's view (none
        rebound or removed)."""
        params = self.params
        if not all(map(operator.eq, map(_KIND, params), repeat(self.kind))):
            return False
        for name, version in self.versions.items():
            if self.flats[name]._version != version:
                return False
        try:  # get: no entry made for a member without state (None: a TypeError)
            found = chain.from_iterable(map(self.entries, map(state.get, params)))
            return all(map(operator.is_, found, self.expected))
        except (TypeError, KeyError):  # a member without state, or a slot missing
            return False

    def _cut_tiles(self, whole: bool) -> None:
        """The tiles (see :func:`_tiles`), or with ``whole`` one tile of all the members:
        for a step that needs no scratch (:func:`_scratch_free`), stepped on the members,
        the few operators of a step over the whole plan (MIDAM at 1 M parameters: 3 foreach
        operators, not 3 operators and two views per tile of :data:`TILE`)."""
        sizes = self.sizes
        self.whole = whole
        total = sum(sizes)
        length = (min(total, ACCELERATOR_TILE) if self.device.type in _ACCELERATORS
                  else _tile_length(total))
        self.tiles = ([(0, total, [(i, 0, size) for i, size in enumerate(sizes)])]
                      if whole else _tiles(sizes, length))
        # Members read through a flat view at each step: those a tile slices (or holds
        # alone); members gathered whole are copied as they are, no view needed.
        self.sliced = sorted({i for _, _, pieces in self.tiles for i, a, b in pieces
                              if len(pieces) == 1 or not (a == 0 and b == sizes[i])})

    def _prepare(self, rule: UpdateRule, lists: bool) -> None:
        """Allocate the scratch and cut, once, every tile's views of it and of the slot
        buffers: they depend only on the plan (the buffers are fixed for its life), so a step
        reads them instead of slicing anew (a few operators and dicts per tile).

        With ``lists``, a tile of several whole members on the CPU, where the rule has a
        member kernel (:data:`_MEMBER_KERNELS`), is stepped on the members themselves (see
        :class:`_Members`); any other tile of several members is gathered into two vectors
        and scattered back. A step that needs no scratch, stepped so, takes one tile of all
        the members (see :meth:`_cut_tiles`) and a scratch of no elements."""
        slots = {name: flat for name, flat in self.flats.items() if name not in self.counters}
        sizes = self.sizes
        one = torch.ones((), dtype=self.dtype, device=self.device)  # see the kernels
        accelerator = self.device.type in _ACCELERATORS
        lists = (lists and (accelerator or self.device.type == "cpu")
                 and _member_kernel(rule) is not None
                 and self.dtype in (torch.float32, torch.float64))
        # whole members always on the members: fused (see _on_members), or on a GPU
        always = accelerator or (self.dtype is torch.float32 and _fusable(rule))
        one_tile = (lists and len(sizes) > 1 and self._scratch_free(rule)
                    and _on_members([(i, 0, size) for i, size in enumerate(sizes)], sizes,
                                    rule, always))
        if one_tile != self.whole:
            self._cut_tiles(one_tile)
        lengths = [0] if one_tile else [stop - start for start, stop, _ in self.tiles]
        self.scratch = torch.empty((2, max(lengths)), dtype=self.dtype, device=self.device)
        gathers = [stop - start for start, stop, pieces in self.tiles
                   if len(pieces) > 1 and not (lists and _on_members(pieces, sizes, rule,
                                                                     always))]
        self.gathered = torch.empty((2, max(gathers, default=0)), dtype=self.dtype,
                                    device=self.device)
        self.lists = lists
        self.prepared = []
        for start, stop, pieces in self.tiles:
            scratch = self.scratch[:, :stop - start]
            cuts = [(i, a, b, a == 0 and b == sizes[i]) for i, a, b in pieces]
            parts: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
            gathered = members = None
            tile = {name: flat[start:stop] for name, flat in slots.items()}
            if len(pieces) > 1 and lists and _on_members(pieces, sizes, rule, always):
                shapes = [self.params[i].shape for i, _, _ in pieces]
                indices = [i for i, _, _ in pieces]
                members = _Members(
                    None if indices == list(range(len(self.params))) else indices,
                    {name: _cut(flat, shapes) for name, flat in tile.items()},
                    ([], []) if one_tile
                    else (_cut(scratch[0], shapes), _cut(scratch[1], shapes)),
                    [one] * len(pieces))
            elif len(pieces) > 1:  # the members' places in the gathered vectors, shaped alike
                gathered = self.gathered[:, :stop - start]
                offset = 0
                for i, a, b, whole in cuts:
                    for row, part in zip(gathered, parts):
                        piece = row[offset:offset + b - a]
                        part.append(piece.view(self.params[i].shape) if whole else piece)
                    offset += b - a
            self.prepared.append(_PreparedTile(
                pieces, (scratch[0], scratch[1], one),
                None if gathered is None else (gathered[0], gathered[1]),
                tile, parts, cuts, members))

    def _scratch_free(self, rule: UpdateRule) -> bool:
        """Whether a member step of ``rule`` on this plan needs no scratch: where
        :func:`_scratch_free` says so, and on an accelerator a fused step (its direction, where
        it is not the gradients, is a new list of tensors for the step, as torch.optim's
        foreach steps make: transient memory, not a scratch kept beside a large model)."""
        if _scratch_free(rule):
            return True
        return (self.device.type in _ACCELERATORS and self.dtype is torch.float32
                and _fused_without_scratch(rule))

    def update(self, rule: UpdateRule, rates: Any, auxiliary: bool,
               grads: list[torch.Tensor]) -> None:
        """One step of the members, whose gradients are ``grads`` (all set)."""
        params = self.params
        kernel = _in_place_kernel(rule, self.dtype, grads, rates)
        if kernel is _pdsca_step_ and auxiliary and rates.ce_phase is True:
            return  # PDSCA's cross-entropy phase leaves its auxiliaries and counters alone
        if (self.scratch is None or (kernel is None and self.lists)  # gather from now on
                or (self.whole and not self._scratch_free(rule))):  # (a rule changed)
            self._prepare(rule, lists=kernel is not None)
        # Flat views of the sliced members' live values and gradients (a copy where one is
        # not contiguous, e.g. channels_last; its parameter is written back at the end).
        values = flat_grads = _NO_VIEWS
        if self.sliced:
            values = {i: _flat_view(params[i]) for i in self.sliced}  # no_grad: like .data
            flat_grads = {i: _flat_view(grads[i]) for i in self.sliced}
        counters = self.counters
        member_kernel = _MEMBER_KERNELS[kernel] if self.lists and kernel is not None else None
        for pieces, scratch, gathered, tile, parts, cuts, members in self.prepared:
            if members is not None and member_kernel is not None:  # on the members
                if members.indices is None:
                    tile_params, tile_grads = params, grads
                else:
                    tile_params = [params[i] for i in members.indices]
                    tile_grads = [grads[i] for i in members.indices]
                counters = member_kernel(
                    rule, tile_grads, tile_params, tile, members, self.counters, rates,
                    auxiliary, scratch)
                continue
            if gathered is None:
                index, first, last = pieces[0]
                value, grad = values[index][first:last], flat_grads[index][first:last]
                whole_members = None
            else:  # whole members are copied as they are: no view or slice operator
                whole_members = [params[i] if whole else values[i][a:b]
                                 for i, a, b, whole in cuts]
                torch._foreach_copy_(parts[0], whole_members)
                value = gathered[0]
                if all(grad.dtype == self.dtype for grad in grads):
                    torch._foreach_copy_(parts[1], [grads[i] if whole else flat_grads[i][a:b]
                                                    for i, a, b, whole in cuts])
                    grad = gathered[1]
                else:  # the core rule casts it
                    grad = torch.cat([_flat_view(grads[i])[a:b] for i, a, b, _ in cuts])
            if kernel is not None:
                new_value = value
                counters = kernel(rule, grad, value, tile, self.counters, rates, auxiliary,
                                  scratch)
            else:
                new_value, new_slots = rule.update_param(
                    grad, value, rule.slots_type(**self.counters, **tile), rates,
                    auxiliary=auxiliary)
                counters = {name: getattr(new_slots, name) for name in self.counters}
                for name, piece in tile.items():
                    new = getattr(new_slots, name)
                    if new is not piece:
                        piece.copy_(new)
            if whole_members is not None:
                if new_value is not value:
                    value.copy_(new_value)
                torch._foreach_copy_(whole_members, parts[0])
            elif new_value is not value:
                value.copy_(new_value)
        for i, value in values.items():
            param = params[i]
            if not param.is_contiguous():
                param.copy_(value.view(param.shape))
        for name, count in counters.items():
            if count != self.counters[name]:
                flat = self.flats[name]
                flat.fill_(count)
                self.counters[name] = count
                self.versions[name] = flat._version


_NO_VIEWS: dict[int, torch.Tensor] = {}
_KIND = operator.attrgetter("dtype", "device")
_GRAD = operator.attrgetter("grad")


def _slot_getter(names: tuple[str, ...]) -> Callable[[Any], tuple[torch.Tensor, ...]]:
    """A function of a state entry: its tensors of ``names`` (one at least), as a tuple."""
    if len(names) > 1:
        return operator.itemgetter(*names)
    name = names[0]

    def one(entries: Any) -> tuple[torch.Tensor, ...]:
        return (entries[name],)
    return one


def _on_members(pieces: list[tuple[int, int, int]], sizes: list[int], rule: UpdateRule,
                fused: bool = False) -> bool:
    """Whether a tile of ``pieces`` is stepped on its members (see :class:`_Members`): whole
    members only. Where the update is ``fused`` (:func:`_fuses`) always: a fused kernel is
    one operator for all members, and its result depends on where a tensor's elements fall
    in the kernel's vectors, so per member it is torch.optim's fused step bit for bit.
    Otherwise of :data:`MEMBER_TILE` elements or more in all (below, the vectors of a
    step stay in the core's cache and the two passes saved cost little against a foreach
    operator's dispatch per member), and either the rule's member step takes no more
    foreach operators than gathering does (the gradients' copy, weight decay's term and the
    update, against two copies in and one out), or the members hold :data:`MEMBER_SIZE`
    elements or more on average (the passes saved outweigh a dispatch per member of each
    further foreach operator)."""
    total = 0
    for i, a, b in pieces:
        if a != 0 or b != sizes[i]:
            return False
        total += b
    return fused or total >= MEMBER_TILE and (not _member_overhead(rule)
                                     or total >= MEMBER_SIZE * len(pieces))


def _member_overhead(rule: UpdateRule) -> bool:
    """Whether the member step of ``rule`` takes more foreach operators than gathering:
    epoch decay (θ - θ_ref and the iterate sum), decoupled weight decay, PDSCA (its weight
    average)."""
    return (getattr(rule, "epoch_decay", 0) > 0 or isinstance(rule, xrisk.optim.PDSCA)
            or (getattr(rule, "decoupled_weight_decay", False)
                and getattr(rule, "weight_decay", 0) > 0))


def _cut(flat: torch.Tensor, shapes: list[torch.Size]) -> list[torch.Tensor]:
    """Consecutive views of ``flat`` shaped as ``shapes``."""
    views, offset = [], 0
    for shape in shapes:
        size = math.prod(shape)
        views.append(flat[offset:offset + size].view(shape))
        offset += size
    return views


class _Members(NamedTuple):
    """A tile of several whole members stepped on the members themselves: the parameters
    and their gradients as lists to foreach operators, the slot buffers and the scratch as
    the tile's flat vectors (one operator where the parameters take no part) and as views
    shaped like the members (``slots``, ``scratch``: the two scratch vectors), so nothing is
    gathered or scattered (a copy in of the values and gradients and one back out, three of
    a step's 8 to 16 passes over the tile). On the CPU the foreach operators run the same
    per-tensor kernels as the tile's (bit for bit, as the property test checks); on an
    accelerator (:data:`_ACCELERATORS`) they are multi-tensor kernels, a launch for many
    members, checked against the CPU's steps by ``benchmarks/gpu_smoke.py``.

    ``indices``: the plan's members in the tile (None: all of them, in order); ``ones``: the
    0-d one of the kernels once per member."""

    indices: list[int] | None
    slots: dict[str, list[torch.Tensor]]
    scratch: tuple[list[torch.Tensor], list[torch.Tensor]]
    ones: list[torch.Tensor]


class _PreparedTile(NamedTuple):
    """One tile of a :class:`_FlatPlan` with its fixed views: the member ``pieces``
    (``(member, first, last)``), the kernel's :data:`Scratch`, the two ``gathered``
    vectors of a tile of several pieces (None for one piece), the slot buffers' ``slots``,
    ``parts``: the places of the pieces in the two gathered vectors (a whole member's shaped
    as the member; empty lists for one piece), ``cuts``: each piece with whether it is
    its whole member, and ``members``: the tile's lists where it is stepped on its members
    instead of gathered (see :class:`_Members`; then ``gathered`` is None)."""

    pieces: list[tuple[int, int, int]]
    scratch: Scratch
    gathered: tuple[torch.Tensor, torch.Tensor] | None
    slots: dict[str, torch.Tensor]
    parts: tuple[list[torch.Tensor], list[torch.Tensor]]
    cuts: list[tuple[int, int, int, bool]]
    members: _Members | None


# --------------------------------------------------------------------------- in-place kernels
# The core rules' update_param, op for op, in place on one tile: every element goes through
# the same roundings of the same operands in the same order (a product or sum with its
# operands swapped is the same operation), so the results are the core rule's bit for bit
# (tests/test_optim_torch.py checks it over drawn rules, shapes and dtypes), without the
# rule's temporaries: ``scratch`` holds two vectors of the tile's length.
#
# ``x + c·y`` (a product, rounded, then a sum, rounded: the core's arithmetic) runs as one
# pass, ``x.addcmul_(y, one, value=c)`` with ``one`` a 0-d 1: torch computes
# ``x + (c·y)·one``, whose product by 1 is exact, so even where the multiply-add is fused
# (FMA) the result is round(x + round(c·y)), the two operations' (unlike ``add_(y,
# alpha=c)`` or ``addcmul_(y, c_tensor)``, fused into one rounding). ``x - q/r`` runs as
# ``x.addcdiv_(q, r, value=-1)`` for the same reason (a product by -1 is exact).

Slots = dict[str, torch.Tensor]
#: The kernels' two scratch vectors of the tile's length, and a 0-d 1 of their dtype.
Scratch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _direction_(rule: Any, grad: torch.Tensor, p: torch.Tensor,
                reference: torch.Tensor | None, scratch: Scratch, *,
                weight_decay: float) -> torch.Tensor:
    """The core's ``d = clip(g) + epoch_decay·(θ - θ_ref) + weight_decay·θ`` in
    ``scratch[0]``, or ``grad`` itself when nothing is clipped or added (a clip at infinity
    is the identity): read it, never write it."""
    out, spare, one = scratch
    clip = rule.clip_value
    d = grad if clip == math.inf else torch.clamp(grad, -clip, clip, out=out)
    if rule.epoch_decay > 0 and reference is not None:  # the slot exists with epoch decay
        pull = torch.sub(p, reference, out=spare)
        d = (torch.addcmul(grad, pull, one, value=rule.epoch_decay, out=out) if d is grad
             else d.addcmul_(pull, one, value=rule.epoch_decay))
    if weight_decay > 0:
        d = (torch.addcmul(grad, p, one, value=weight_decay, out=out) if d is grad
             else d.addcmul_(p, one, value=weight_decay))
    return d


#: Devices whose float32 parameters take torch's fused optimizer kernels (see
#: :func:`_fuses`): the CPU's and CUDA's (torch.optim's ``fused=True``; on CUDA checked
#: against it bit for bit and timed by ``benchmarks/gpu_smoke.py``).
_FUSED_DEVICES = ("cpu", "cuda")


def _fuses(p: torch.Tensor) -> bool:
    """Whether the update of ``p`` (after its direction ``d``) runs as torch's fused SGD or
    Adam kernel: float32 on the CPU or CUDA (:data:`_FUSED_DEVICES`). Those kernels make one
    pass over the parameter, its slots and ``d`` where the core's operations make three
    (SGD) to eight (Adam), and round each multiply-add once (an FMA) where the core rounds
    its product and its sum apart, so a float32 step agrees with the core rule to a few
    units in the last place, not bit for bit (the design's float32 contract: within a stated
    tolerance, tests/test_optim_torch.py). float64 keeps the core's operations, bit for bit:
    the cross-framework identity and the runner's identical numbers are float64 promises.
    Under ``torch.compile`` the core's operations run (Inductor fuses them itself; the fused
    kernels' step tensor made in the graph fails its functionalization)."""
    return (p.dtype is torch.float32 and p.device.type in _FUSED_DEVICES
            and not torch.compiler.is_compiling())


def _fused_momentum_(params: list[torch.Tensor], directions: list[torch.Tensor],
                     buffers: list[torch.Tensor] | None, *, lr: float, momentum: float,
                     new_weight: float, nesterov: bool, first: bool,
                     weight_decay: float) -> None:
    """torch's fused SGD on ``d' = d + weight_decay·θ``: ``buf ← momentum·buf +
    new_weight·d'`` (``buf ← d'`` on the ``first`` step), ``θ ← θ - lr·buf`` (Nesterov:
    ``θ ← θ - lr·(d' + momentum·buf)``); without ``buffers``, ``θ ← θ - lr·d'``. The rules'
    EMA ``(1 - μ)·buf + μ·d`` is momentum ``1 - μ``, new weight ``μ``."""
    if buffers is None:
        torch._fused_sgd_(params, directions, [], weight_decay=weight_decay, momentum=0.0,
                          lr=lr, dampening=0.0, nesterov=False, maximize=False,
                          is_first_step=False)
    else:
        torch._fused_sgd_(params, directions, buffers, weight_decay=weight_decay,
                          momentum=momentum, lr=lr, dampening=1.0 - new_weight,
                          nesterov=nesterov, maximize=False, is_first_step=first)


def _fused_direction_(rule: Any, grad: torch.Tensor, p: torch.Tensor,
                      reference: torch.Tensor | None, out: torch.Tensor,
                      weight_decay: float) -> tuple[torch.Tensor, float]:
    """The direction of a fused update and the weight decay its kernel adds: ``d =
    clip(g) - ε·θ_ref`` in ``out`` (``grad`` itself when nothing is clipped or added) and
    ``λ + ε``, so the kernel's ``d + (λ + ε)·θ`` is the core's ``clip(g) + ε·(θ - θ_ref) +
    λ·θ`` (ε: the epoch decay) in two passes where the core takes four."""
    clip = rule.clip_value
    d = grad if clip == math.inf else torch.clamp(grad, -clip, clip, out=out)
    if rule.epoch_decay > 0 and reference is not None:  # the slot exists with epoch decay
        d = (torch.add(grad, reference, alpha=-rule.epoch_decay, out=out) if d is grad
             else d.add_(reference, alpha=-rule.epoch_decay))
        weight_decay += rule.epoch_decay
    return d, weight_decay


def _fused_direction_members_(rule: Any, grads: list[torch.Tensor],
                              reference: torch.Tensor | None, scratch: Scratch,
                              members: _Members, weight_decay: float
                              ) -> tuple[list[torch.Tensor], float]:
    """:func:`_fused_direction_` of a tile stepped on its members: the gradients themselves
    where nothing is clipped or added, else in ``scratch[0]`` (the tile's flat operators
    after one copy in), or, for a tile without scratch (an accelerator's, see
    :meth:`_FlatPlan._scratch_free`), in new tensors made by foreach operators."""
    clip = rule.clip_value
    pull = reference if rule.epoch_decay > 0 else None  # the slot exists with epoch decay
    if clip == math.inf and pull is None:
        return grads, weight_decay
    if not members.scratch[0]:
        if clip != math.inf:
            directions = list(torch._foreach_clamp_min(grads, -clip))
            torch._foreach_clamp_max_(directions, clip)
        if pull is not None:
            references = members.slots["reference"]
            if clip == math.inf:
                directions = list(torch._foreach_add(grads, references,
                                                     alpha=-rule.epoch_decay))
            else:
                torch._foreach_add_(directions, references, alpha=-rule.epoch_decay)
            weight_decay += rule.epoch_decay
        return directions, weight_decay
    out = scratch[0]
    torch._foreach_copy_(members.scratch[0], grads)
    if clip != math.inf:
        out.clamp_(-clip, clip)
    if pull is not None:
        out.add_(pull, alpha=-rule.epoch_decay)
        weight_decay += rule.epoch_decay
    return members.scratch[0], weight_decay


def _fused_adam_(rule: Any, params: list[torch.Tensor], directions: list[torch.Tensor],
                 moments: list[torch.Tensor], seconds: list[torch.Tensor],
                 maxima: list[torch.Tensor], count: int, lr: float,
                 weight_decay: float) -> None:
    """torch's fused Adam on ``d' = d + weight_decay·θ``: the rule's moments, bias
    corrections and ``θ ← θ - (lr/b₁)·m / (√v/√b₂ + ε)`` (AMSGrad: v the running maximum) in
    one pass; AdamW's decoupled ``θ(1 - lr·λ)`` is its kernel's own first operation."""
    beta1, beta2 = rule.betas
    step = torch.full((), count + 1, dtype=torch.float32, device=params[0].device)
    if rule.decoupled_weight_decay:
        if weight_decay > 0:
            raise RuntimeError("xrisk: a decoupled and a coupled weight decay in one fused "
                               "Adam step; expected the direction to hold the coupled one")
        kernel, weight_decay = torch._fused_adamw_, rule.weight_decay
    else:
        kernel = torch._fused_adam_
    kernel(params, directions, moments, seconds, maxima if rule.amsgrad else [],
           [step] * len(params), lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay,
           eps=rule.eps, amsgrad=rule.amsgrad, maximize=False)


def _fused_clipped_update_(rule: Any, params: list[torch.Tensor],
                           directions: list[torch.Tensor],
                           slots: dict[str, list[torch.Tensor]], count: int,
                           lr: float, weight_decay: float) -> None:
    """The update of :func:`_clipped_step_` after its direction, by the fused kernels (which
    add ``weight_decay·θ`` to the direction)."""
    if rule.mode == "adam":
        _fused_adam_(rule, params, directions, slots["momentum"], slots["second_moment"],
                     slots.get("max_second_moment", []), count, lr, weight_decay)
    elif rule.momentum > 0:
        ema = rule.sgd_rule == "ema"
        _fused_momentum_(params, directions, slots["momentum"], lr=lr,
                         momentum=1 - rule.momentum if ema else rule.momentum,
                         new_weight=rule.momentum if ema else 1 - rule.dampening,
                         nesterov=rule.nesterov, first=count == 0, weight_decay=weight_decay)
    else:
        _fused_momentum_(params, directions, None, lr=lr, momentum=0.0, new_weight=1.0,
                         nesterov=False, first=False, weight_decay=weight_decay)


def _fused_without_scratch(rule: Any) -> bool:
    """Whether the member step of ``rule`` in float32 is fused with its direction from
    :func:`_fused_direction_members_` (PDSCA's; the clipped rules' of
    :func:`_fused_direction_applies`), so it can run without scratch."""
    kernel = _rule_kernel(rule)
    if kernel is _pdsca_step_:
        return True
    return kernel is _clipped_step_ and _fusable(rule) and _fused_direction_applies(rule)


def _fused_direction_applies(rule: Any) -> bool:
    """Whether a fused clipped rule's member step takes its direction from
    :func:`_fused_direction_members_`, which moves the epoch decay's ``ε·θ`` into the
    kernel's weight decay: all but AdamW with an epoch decay (the AdamW kernel's decay is
    the decoupled one)."""
    return not (rule.decoupled_weight_decay and rule.epoch_decay > 0)


def _fusable(rule: Any) -> bool:
    """Whether the fused kernels compute the update of ``rule`` (a rule of an in-place
    kernel): all but Nesterov's momentum on the EMA form (``d + μ·buf`` there, where the
    fused kernel would take ``1 - μ``) and a decoupled weight decay outside Adam (only
    AdamW's kernel has it)."""
    sgd = getattr(rule, "mode", "sgd") != "adam"
    return not sgd or not ((getattr(rule, "nesterov", False)
                            and getattr(rule, "sgd_rule", "") == "ema")
                           or getattr(rule, "decoupled_weight_decay", False))


def _clipped_step_(rule: Any, grad: torch.Tensor, p: torch.Tensor, slots: Slots,
                   counters: dict[str, int], rates: Any, auxiliary: bool,
                   scratch: Scratch) -> dict[str, int]:
    """:meth:`xrisk.optim.ClippedRule.update_param` in place (host counters)."""
    free, t, one = scratch
    lr = rates.lr
    fused = _fuses(p) and _fusable(rule)
    count = counters["count"]
    if fused and not rule.decoupled_weight_decay:
        d, decay = _fused_direction_(rule, grad, p, slots.get("reference"), scratch[0],
                                     rule.weight_decay)
        _fused_clipped_update_(rule, [p], [d], {k: [v] for k, v in slots.items()}, count, lr,
                               decay)
        return _clipped_counters(rule, p, slots, counters)
    if rule.decoupled_weight_decay and rule.weight_decay > 0 and not fused:
        p.mul_(1 - lr * rule.weight_decay)
    d = _direction_(rule, grad, p, slots.get("reference"), scratch,
                    weight_decay=0.0 if rule.decoupled_weight_decay else rule.weight_decay)
    if fused:  # AdamW: its epoch decay in d, the decoupled decay in the kernel
        _fused_clipped_update_(rule, [p], [d], {k: [v] for k, v in slots.items()}, count, lr,
                               0.0)
    elif rule.mode == "adam":
        beta1, beta2 = rule.betas
        moment, second = slots["momentum"], slots["second_moment"]
        moment.mul_(beta1).addcmul_(d, one, value=1 - beta1)
        second.mul_(beta2).add_(torch.mul(d, 1 - beta2, out=t).mul_(d))
        if rule.amsgrad:
            second = torch.maximum(slots["max_second_moment"], second,
                                   out=slots["max_second_moment"])
        bias1, root2 = 1 - beta1 ** (count + 1), math.sqrt(1 - beta2 ** (count + 1))
        denominator = torch.sqrt(second, out=free).div_(root2).add_(rule.eps)
        p.addcdiv_(torch.mul(moment, lr / bias1, out=t), denominator, value=-1)
    elif rule.momentum > 0:
        buffer = slots["momentum"]
        if count == 0:
            buffer.copy_(d)
        elif rule.sgd_rule == "ema":
            buffer.mul_(1 - rule.momentum).addcmul_(d, one, value=rule.momentum)
        else:
            buffer.mul_(rule.momentum).addcmul_(d, one, value=1 - rule.dampening)
        if rule.nesterov:
            p.addcmul_(torch.addcmul(d, buffer, one, value=rule.momentum, out=t), one,
                       value=-lr)
        else:
            p.addcmul_(buffer, one, value=-lr)
    else:
        p.addcmul_(d, one, value=-lr)
    return _clipped_counters(rule, p, slots, counters)


def _clipped_counters(rule: Any, p: torch.Tensor, slots: Slots, counters: dict[str, int]
                      ) -> dict[str, int]:
    """The end of :func:`_clipped_step_`: the iterate sum (with epoch decay), the counters."""
    new = {"count": counters["count"] + 1}
    if rule.epoch_decay > 0:
        slots["iterate_sum"].add_(p)
        new["average_count"] = counters["average_count"] + 1
    return new


def _pdsca_step_(rule: Any, grad: torch.Tensor, p: torch.Tensor, slots: Slots,
                 counters: dict[str, int], rates: Any, auxiliary: bool,
                 scratch: Scratch) -> dict[str, int]:
    """:meth:`xrisk.optim.PDSCA.update_param` in place (host counters, a Python phase)."""
    one = scratch[2]
    fused = _fuses(p)
    if fused:
        d, decay = _fused_direction_(rule, grad, p, slots.get("reference"), scratch[0],
                                     rule.weight_decay)
    else:
        d = _direction_(rule, grad, p, slots.get("reference"), scratch,
                        weight_decay=rule.weight_decay)
    ce, new = rates.ce_phase, dict(counters)
    moved = not ce or not auxiliary
    if ce and not auxiliary:  # a plain step, then the weight average
        if fused:
            _fused_momentum_([p], [d], None, lr=rates.ce_lr, momentum=0.0, new_weight=1.0,
                             nesterov=False, first=False, weight_decay=decay)
        else:
            p.addcmul_(d, one, value=-rates.ce_lr)
        if rule.beta1 > 0:
            average = slots["weight_average"]
            if counters["ce_count"] == 0:
                average.copy_(p)
            else:
                average.mul_(1 - rule.beta1).addcmul_(p, one, value=rule.beta1)
                p.copy_(average)
        new["ce_count"] += 1
    elif not ce:  # LibAUC's EMA momentum
        buffer = slots["momentum"]
        if fused:
            _fused_momentum_([p], [d], [buffer], lr=rates.lr, momentum=1 - rule.beta2,
                             new_weight=rule.beta2, nesterov=False,
                             first=counters["auc_count"] == 0, weight_decay=decay)
        else:
            if counters["auc_count"] == 0:
                buffer.copy_(d)
            else:
                buffer.mul_(1 - rule.beta2).addcmul_(d, one, value=rule.beta2)
            p.addcmul_(buffer, one, value=-rates.lr)
        new["auc_count"] += 1
    if rule.epoch_decay > 0 and moved:
        slots["iterate_sum"].add_(p)
        new["average_count"] += 1
    return new


def _scratch_free(rule: Any) -> bool:
    """Whether the member step of ``rule`` (:func:`_clipped_step_members_`) needs no
    scratch: a momentum or plain SGD step (not Nesterov's) whose direction is the gradient
    itself (see :func:`_is_gradient`), as MIDAM's."""
    return _rule_kernel(rule) is _clipped_step_ and _gradient_step(rule)


def _gradient_step(rule: Any) -> bool:
    """Whether a rule of :func:`_clipped_step_` takes a momentum or plain SGD step (not
    Nesterov's) on the gradient itself (see :func:`_is_gradient`); the cheap test first
    (this runs at every step of the member kernel)."""
    return (rule.clip_value == math.inf and rule.mode != "adam" and not rule.nesterov
            and _is_gradient(rule, 0.0 if rule.decoupled_weight_decay else rule.weight_decay))


def _is_gradient(rule: Any, weight_decay: float) -> bool:
    """Whether the direction ``d`` of :func:`_direction_` is the gradient itself: no clip (at
    infinity it is the identity), no epoch decay, no coupled weight decay (MIDAM's
    default)."""
    return rule.clip_value == math.inf and weight_decay <= 0 and rule.epoch_decay <= 0


def _direction_members_(rule: Any, grads: list[torch.Tensor], params: list[torch.Tensor],
                        reference: torch.Tensor | None, scratch: Scratch,
                        members: _Members, *, weight_decay: float) -> torch.Tensor:
    """:func:`_direction_` of a tile stepped on its members, always in ``scratch[0]`` (the
    gradients are copied there first: a pass the gathering tile makes too; the kernels read
    the gradients themselves instead where that is all ``d`` is and they read it once, see
    :func:`_is_gradient`)."""
    out, spare, one = scratch
    out_parts, spare_parts = members.scratch
    torch._foreach_copy_(out_parts, grads)
    clip = rule.clip_value
    if clip != math.inf:
        out.clamp_(-clip, clip)
    if rule.epoch_decay > 0 and reference is not None:
        torch._foreach_copy_(spare_parts, params)  # θ - θ_ref as the tile's sub(θ, θ_ref)
        out.addcmul_(spare.sub_(reference), one, value=rule.epoch_decay)
    if weight_decay > 0:
        torch._foreach_addcmul_(out_parts, params, members.ones, value=weight_decay)
    return out


def _clipped_step_members_(rule: Any, grads: list[torch.Tensor], params: list[torch.Tensor],
                           slots: Slots, members: _Members, counters: dict[str, int],
                           rates: Any, auxiliary: bool, scratch: Scratch) -> dict[str, int]:
    """:func:`_clipped_step_` on a tile's members (see :class:`_Members`): the same
    operators, foreach over the members where a parameter takes part."""
    free, t, one = scratch
    ones, parts = members.ones, members.slots
    lr = rates.lr
    fused = _fuses(params[0]) and _fusable(rule)
    if rule.decoupled_weight_decay and rule.weight_decay > 0 and not fused:
        torch._foreach_mul_(params, 1 - lr * rule.weight_decay)
    weight_decay = 0.0 if rule.decoupled_weight_decay else rule.weight_decay
    count = counters["count"]
    if _gradient_step(rule):
        # d is the gradients (MIDAM): foreach operators read them where they are, no copy
        # into the scratch (a pass of the four of MIDAM's step)
        if fused:
            _fused_clipped_update_(rule, params, grads, parts, count, lr, 0.0)
        elif rule.momentum > 0:
            buffers = parts["momentum"]
            if count == 0:
                torch._foreach_copy_(buffers, grads)
            else:
                ema = rule.sgd_rule == "ema"
                slots["momentum"].mul_(1 - rule.momentum if ema else rule.momentum)
                torch._foreach_addcmul_(buffers, grads, ones, value=rule.momentum if ema
                                        else 1 - rule.dampening)
            torch._foreach_addcmul_(params, buffers, ones, value=-lr)
        else:
            torch._foreach_addcmul_(params, grads, ones, value=-lr)
        return {"count": count + 1}  # no epoch decay: no iterate sum
    if fused and _fused_direction_applies(rule):
        # (AdamW: weight_decay is 0 here, its kernel adds the decoupled decay)
        directions, decay = _fused_direction_members_(rule, grads, slots.get("reference"),
                                                      scratch, members, weight_decay)
        _fused_clipped_update_(rule, params, directions, parts, count, lr, decay)
        new = {"count": count + 1}
        if rule.epoch_decay > 0:
            torch._foreach_add_(parts["iterate_sum"], params)
            new["average_count"] = counters["average_count"] + 1
        return new
    d = _direction_members_(rule, grads, params, slots.get("reference"), scratch, members,
                            weight_decay=weight_decay)
    if fused:  # AdamW with an epoch decay: it in d, the decoupled decay in the kernel
        _fused_clipped_update_(rule, params, members.scratch[0], parts, count, lr, 0.0)
    elif rule.mode == "adam":
        beta1, beta2 = rule.betas
        moment, second = slots["momentum"], slots["second_moment"]
        moment.mul_(beta1).addcmul_(d, one, value=1 - beta1)
        second.mul_(beta2).add_(torch.mul(d, 1 - beta2, out=t).mul_(d))
        if rule.amsgrad:
            second = torch.maximum(slots["max_second_moment"], second,
                                   out=slots["max_second_moment"])
        bias1, root2 = 1 - beta1 ** (count + 1), math.sqrt(1 - beta2 ** (count + 1))
        torch.sqrt(second, out=free).div_(root2).add_(rule.eps)
        torch.mul(moment, lr / bias1, out=t)
        torch._foreach_addcdiv_(params, members.scratch[1], members.scratch[0], value=-1)
    elif rule.momentum > 0:
        buffer = slots["momentum"]
        if count == 0:
            buffer.copy_(d)
        elif rule.sgd_rule == "ema":
            buffer.mul_(1 - rule.momentum).addcmul_(d, one, value=rule.momentum)
        else:
            buffer.mul_(rule.momentum).addcmul_(d, one, value=1 - rule.dampening)
        if rule.nesterov:
            torch.addcmul(d, buffer, one, value=rule.momentum, out=t)
            torch._foreach_addcmul_(params, members.scratch[1], ones, value=-lr)
        else:
            torch._foreach_addcmul_(params, parts["momentum"], ones, value=-lr)
    else:
        torch._foreach_addcmul_(params, members.scratch[0], ones, value=-lr)
    new = {"count": count + 1}
    if rule.epoch_decay > 0:
        torch._foreach_add_(parts["iterate_sum"], params)
        new["average_count"] = counters["average_count"] + 1
    return new


def _pdsca_step_members_(rule: Any, grads: list[torch.Tensor], params: list[torch.Tensor],
                         slots: Slots, members: _Members, counters: dict[str, int],
                         rates: Any, auxiliary: bool, scratch: Scratch) -> dict[str, int]:
    """:func:`_pdsca_step_` on a tile's members (see :class:`_Members`)."""
    one = scratch[2]
    ones, parts = members.ones, members.slots
    fused = _fuses(params[0])
    if fused:
        directions, decay = _fused_direction_members_(rule, grads, slots.get("reference"),
                                                      scratch, members, rule.weight_decay)
    else:
        d = _direction_members_(rule, grads, params, slots.get("reference"), scratch,
                                members, weight_decay=rule.weight_decay)
    ce, new = rates.ce_phase, dict(counters)
    moved = not ce or not auxiliary
    if ce and not auxiliary:  # a plain step, then the weight average
        if fused:
            _fused_momentum_(params, directions, None, lr=rates.ce_lr, momentum=0.0,
                             new_weight=1.0, nesterov=False, first=False, weight_decay=decay)
        else:
            torch._foreach_addcmul_(params, members.scratch[0], ones, value=-rates.ce_lr)
        if rule.beta1 > 0:
            average = slots["weight_average"]
            if counters["ce_count"] == 0:
                torch._foreach_copy_(parts["weight_average"], params)
            else:
                average.mul_(1 - rule.beta1)
                torch._foreach_addcmul_(parts["weight_average"], params, ones,
                                        value=rule.beta1)
                torch._foreach_copy_(params, parts["weight_average"])
        new["ce_count"] += 1
    elif not ce:  # LibAUC's EMA momentum
        buffer = slots["momentum"]
        if fused:
            _fused_momentum_(params, directions, parts["momentum"], lr=rates.lr,
                             momentum=1 - rule.beta2, new_weight=rule.beta2, nesterov=False,
                             first=counters["auc_count"] == 0, weight_decay=decay)
        else:
            if counters["auc_count"] == 0:
                buffer.copy_(d)
            else:
                buffer.mul_(1 - rule.beta2).addcmul_(d, one, value=rule.beta2)
            torch._foreach_addcmul_(params, parts["momentum"], ones, value=-rates.lr)
        new["auc_count"] += 1
    if rule.epoch_decay > 0 and moved:
        torch._foreach_add_(parts["iterate_sum"], params)
        new["average_count"] += 1
    return new


def _lars_step_(rule: Any, grad: torch.Tensor, p: torch.Tensor, slots: Slots,
                lr: float) -> None:
    """:meth:`xrisk.optim.LARS.update_param` in place on one parameter (its norms need the
    whole tensor: at most two transient buffers of the parameter's size, where the rule
    makes eight)."""
    xp = _namespace(p)
    scaled_step = torch.empty_like(p)
    if not (rule.exclude_1d and p.ndim <= 1):
        square = torch.empty_like(p)
        d = grad
        if rule.weight_decay > 0:
            d = torch.mul(p, rule.weight_decay, out=scaled_step).add_(grad)
        p_norm = xp.sqrt(xp.sum(torch.mul(p, p, out=square)))
        d_norm = xp.sqrt(xp.sum(torch.mul(d, d, out=square)))
        del square
        scaled = (p_norm > 0) & (d_norm > 0)
        ratio = rule.trust_coefficient * p_norm / xp.where(scaled, d_norm, xp.ones_like(d_norm))
        grad = torch.mul(d, xp.where(scaled, ratio, xp.ones_like(ratio)), out=scaled_step)
    step = torch.mul(grad, lr, out=scaled_step)
    if rule.momentum > 0:
        step = slots["momentum"].mul_(rule.momentum).add_(step)
    p.sub_(step)


#: The least step ``lr·q`` a fused LARS step takes: the kernel weighs the new direction by
#: ``1 - dampening``, which carries ``lr·q`` as ``1 - (1 - lr·q)`` in double precision,
#: exact to float32's precision from here up; a smaller one goes the exact way.
_LARS_FUSED_LEAST_STEP = 1e-8


def _split_lars(rule: Any, params: list[torch.Tensor],
                applies: Callable[[torch.Tensor], bool]
                ) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """The parameters ``applies`` accepts, as LARS's scaled tensors and its unscaled ones
    (vectors and scalars with ``exclude_1d``), and the others, each in the given order."""
    scaled: list[torch.Tensor] = []
    plain: list[torch.Tensor] = []
    others: list[torch.Tensor] = []
    for param in params:
        if not applies(param):
            others.append(param)
        elif rule.exclude_1d and param.ndim <= 1:
            plain.append(param)
        else:
            scaled.append(param)
    return scaled, plain, others


def _lars_fused_step_(rule: Any, params: list[torch.Tensor],
                      state: dict[torch.Tensor, Slots], lr: float) -> list[torch.Tensor]:
    """:meth:`xrisk.optim.LARS.update_param` on the float32 parameters of ``params`` on the
    CPU or one accelerator (contiguous, with float32 gradients) by torch's fused kernels;
    returns the others.

    The norms by ``torch._foreach_norm`` (one pass each, not the core's ``sum(θ·θ)``). On
    the CPU the trust ratios on the host, then each scaled tensor's ``buf ← μ·buf +
    (lr·q)·d``, ``θ ← θ - buf`` as one fused SGD pass (momentum μ, new weight ``lr·q``, rate
    1): 7 passes over a scaled tensor where the exact step makes 16. On an accelerator the
    ratios stay on the device (reading them would be a host sync): each direction times its
    ``lr·q`` as a new tensor (one multiply per tensor), then one fused pass for all (new
    weight 1), some 12 launches and one per tensor where the exact step makes a dozen per
    tensor. The unscaled tensors (``q = 1``) take one call for them all. float32 to a few
    units in the last place, as the other fused steps (see :func:`_fuses`)."""
    if (type(rule).update_param is not _LARS_UPDATE or not params
            or torch.compiler.is_compiling()):
        return params

    device = params[0].device

    def applies(param: torch.Tensor) -> bool:
        grad = param.grad
        return (param.dtype is torch.float32 and param.device == device
                and param.is_contiguous() and grad is not None
                and grad.dtype is torch.float32 and grad.device == device)

    accelerator = device.type in _ACCELERATORS
    if not (accelerator or device.type == "cpu"):
        return params
    scaled, plain, others = _split_lars(rule, params, applies)
    if not scaled and not plain:
        return params
    momentum = rule.momentum

    def fused(members: list[torch.Tensor], directions: list[torch.Tensor], step: float
              ) -> None:
        if momentum > 0:
            torch._fused_sgd_(members, directions, [state[p]["momentum"] for p in members],
                              weight_decay=0.0, momentum=momentum, lr=1.0,
                              dampening=1.0 - step, nesterov=False, maximize=False,
                              is_first_step=False)
        else:
            torch._fused_sgd_(members, directions, [], weight_decay=0.0, momentum=0.0,
                              lr=step, dampening=0.0, nesterov=False, maximize=False,
                              is_first_step=False)

    if scaled:
        grads = [_grad(p) for p in scaled]
        directions = (list(torch._foreach_add(grads, scaled, alpha=rule.weight_decay))
                      if rule.weight_decay > 0 else grads)
        if accelerator:
            _lars_device_steps_(rule, scaled, grads, directions, lr, fused)
        else:
            _lars_host_steps_(rule, scaled, directions, lr, fused, others)
    if plain:
        if lr >= _LARS_FUSED_LEAST_STEP or momentum <= 0:
            fused(plain, [_grad(p) for p in plain], lr)
        else:
            others.extend(plain)
    return others


def _lars_host_steps_(rule: Any, scaled: list[torch.Tensor], directions: list[torch.Tensor],
                      lr: float, fused: Callable[..., None], others: list[torch.Tensor]) -> None:
    """The CPU's scaled LARS steps of :func:`_lars_fused_step_`: the trust ratios on the host,
    in double precision (a handful of numbers: a dozen small operators' dispatch saved; the
    fused kernel takes ``lr·q`` as a double anyway), one fused pass per tensor with its own
    ``lr·q``; a tensor whose step is under :data:`_LARS_FUSED_LEAST_STEP` joins ``others``."""
    norms = torch.stack([*torch._foreach_norm(scaled),
                         *torch._foreach_norm(directions)]).tolist()
    trust = rule.trust_coefficient
    for param, direction, p_norm, d_norm in zip(scaled, directions, norms[:len(scaled)],
                                                norms[len(scaled):]):
        factor = trust * p_norm / d_norm if p_norm > 0 and d_norm > 0 else 1.0
        if lr * factor >= _LARS_FUSED_LEAST_STEP or rule.momentum <= 0:
            fused([param], [direction], lr * factor)
        else:
            others.append(param)


def _lars_device_steps_(rule: Any, scaled: list[torch.Tensor], grads: list[torch.Tensor],
                        directions: list[torch.Tensor], lr: float,
                        fused: Callable[..., None]) -> None:
    """An accelerator's scaled LARS steps of :func:`_lars_fused_step_`: the trust ratios stay
    on the device, each direction is multiplied by its ``lr·q`` (in place where it is
    already a new tensor, not the gradient), and one fused pass with new weight 1 steps them
    all (no step too small for it: the kernel's weight is exactly 1)."""
    p_norms = torch.stack(torch._foreach_norm(scaled))
    d_norms = torch.stack(torch._foreach_norm(directions))
    trusted = (p_norms > 0) & (d_norms > 0)
    steps = list(torch.where(trusted, rule.trust_coefficient * p_norms
                             / torch.where(trusted, d_norms, 1.0), 1.0).mul_(lr).unbind())
    if directions is grads:  # the caller's gradients: new tensors
        directions = list(torch._foreach_mul(grads, steps))
    else:
        torch._foreach_mul_(directions, steps)
    fused(scaled, directions, 1.0)


def _lars_group_step_(rule: Any, params: list[torch.Tensor],
                      state: dict[torch.Tensor, Slots], rates: Any) -> list[torch.Tensor]:
    """:meth:`xrisk.optim.LARS.update_param` in place on every contiguous parameter of
    ``params`` it applies to (see :func:`_lars_kernel_applies`); returns the others.

    The squared norms are summed per tensor through a scratch buffer of the largest tensor
    (the core's ``sum(θ·θ)``, bit for bit) and the trust ratios of all tensors computed at
    once (the core's 0-d operations on a vector: element-wise the same). The steps of a
    small group run as foreach operators on new ``d·q`` tensors (a dozen operators for the
    group); a larger group's scaled tensors take theirs one by one through the scratch, so
    that no temporary is larger than the largest tensor (the per-tensor rule makes some 25
    operators and 8 temporaries per tensor).
    """
    if type(rule).update_param is not xrisk.optim.LARS.update_param or not params:
        return params
    lr = rates.lr
    scaled, plain, others = _split_lars(
        rule, params, lambda p: p.is_contiguous() and _lars_kernel_applies(rule, p, rates))
    done = scaled + plain
    if not done:
        return others
    # The step lr·(d·q) joins the update as addcmul_(d·q, 1, value=lr): round(x + round(lr·d·q)),
    # the core's two operations (see the note above the in-place kernels).
    one_of: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
    for param in done:
        kind = (param.dtype, param.device)
        if kind not in one_of:
            one_of[kind] = torch.ones((), dtype=param.dtype, device=param.device)
    stepped: list[torch.Tensor] = []  # updated by foreach operators with these directions
    directions: list[torch.Tensor] = []
    for kind, one in one_of.items():
        members = [p for p in scaled if (p.dtype, p.device) == kind]
        if not members:
            continue
        largest = max(p.numel() for p in members)
        scratch = torch.empty((2 if rule.weight_decay > 0 else 1, largest), dtype=kind[0],
                              device=kind[1])
        factors = _lars_factors(rule, members, scratch)
        if sum(p.numel() for p in members) <= SMALL_PLAN:  # d·q as new tensors: few operators
            directions += _lars_directions(rule, members, factors)
            stepped += members
            continue
        for param, factor in zip(members, factors):  # d·q in the scratch: no new tensor
            room = scratch[-1, :param.numel()].view(param.shape)
            if rule.weight_decay > 0:
                scaled_d = torch.mul(param, rule.weight_decay, out=room).add_(_grad(param))
                scaled_d.mul_(factor)
            else:
                scaled_d = torch.mul(_grad(param), factor, out=room)
            if rule.momentum > 0:
                buffer = state[param]["momentum"]
                buffer.mul_(rule.momentum).addcmul_(scaled_d, one, value=lr)
                param.sub_(buffer)
            else:
                param.addcmul_(scaled_d, one, value=-lr)
    directions += [_grad(p) for p in plain]
    stepped += plain
    if stepped:
        ones = [one_of[(p.dtype, p.device)] for p in stepped]
        if rule.momentum > 0:  # buf ← μ·buf + lr·d, θ ← θ - buf
            buffers = [state[p]["momentum"] for p in stepped]
            torch._foreach_mul_(buffers, rule.momentum)
            torch._foreach_addcmul_(buffers, directions, ones, value=lr)
            torch._foreach_sub_(stepped, buffers)
        else:  # θ ← θ - lr·d
            torch._foreach_addcmul_(stepped, directions, ones, value=-lr)
    return others


class _LarsPlan:
    """LARS's eager step of a group of at most :data:`SMALL_PLAN` scaled elements, in a
    fixed number of operators (not a dozen per tensor: at 0.1 M parameters a step was
    operators, not arithmetic).

    The members (contiguous float32/float64 parameters of one device with contiguous
    gradients of their dtype) are ordered as the scaled tensors, those of one size next to
    each other (a *block*), then the others (``exclude_1d``); the momentum buffers become
    views of one flat vector in that order (as :class:`_FlatPlan` does), and a scratch of
    two rows of the scaled elements holds their squares and their directions.

    A step copies the scaled parameters into the first row (one ``_foreach_copy_``),
    squares it in place and sums each block row-wise into a vector of norms (``sum(θ·θ)``
    of each tensor: the reduction of one contiguous row is that of the tensor alone, on one
    thread or for rows under ATen's grain of 32 768 elements; larger equal tensors on
    several threads form blocks of one, see :data:`_SUM_GRAIN`); likewise ``d`` in the
    second row and ``sum(d·d)``; the trust ratios of all tensors at once by the core's 0-d
    operations on the vector; ``d·q`` in place, a block at a time; then ``buf ← μ·buf +
    lr·(d·q)`` on the flat buffer and ``θ ← θ - buf`` by foreach operators. Bit for bit the
    core rule (the same roundings of the same operands), at the price of a copy of the
    parameters and the gradients into the scratch (two passes of ten over the scaled
    elements, cheap where the plan applies: everything is in the cache)."""

    def __init__(self, params: list[torch.Tensor], rule: Any,
                 state: dict[torch.Tensor, Slots]) -> None:
        dtype, device = params[0].dtype, params[0].device
        self.params = params
        self.kind = (dtype, device)
        self.threads = torch.get_num_threads()
        self.rule = rule
        scaled = [p for p in params if not (rule.exclude_1d and p.ndim <= 1)]
        plain = [p for p in params if rule.exclude_1d and p.ndim <= 1]
        by_size: dict[int, list[torch.Tensor]] = {}
        for param in scaled:
            by_size.setdefault(param.numel(), []).append(param)
        blocks: list[list[torch.Tensor]] = []
        for size, members in by_size.items():
            if self.threads > 1 and size >= _SUM_GRAIN:  # see _SUM_GRAIN
                blocks += [[member] for member in members]
            else:
                blocks.append(members)
        self.scaled = [p for block in blocks for p in block]
        self.plain = plain
        self.order = self.scaled + plain
        shapes = [p.shape for p in self.scaled]
        length = sum(p.numel() for p in self.scaled)
        count = len(self.scaled)
        self.scratch = torch.empty((2, length), dtype=dtype, device=device)
        self.squares, self.directions = self.scratch[0], self.scratch[1]
        self.square_views = _cut(self.squares, shapes)
        self.direction_views = _cut(self.directions, shapes)
        self.norms = torch.empty((2, count), dtype=dtype, device=device)
        self.p_norm, self.d_norm = self.norms[0], self.norms[1]
        self.positive = torch.empty((2, count), dtype=torch.bool, device=device)
        self.scaled_mask = torch.empty(count, dtype=torch.bool, device=device)
        self.ones = torch.ones(count, dtype=dtype, device=device)
        self.denominator = torch.empty(count, dtype=dtype, device=device)
        self.factors = torch.empty(count, dtype=dtype, device=device)
        # per block: its squares and directions as rows, its norms and factors
        self.blocks: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                torch.Tensor]] = []
        offset = index = 0
        for block in blocks:
            rows, size = len(block), block[0].numel()
            cut = slice(offset, offset + rows * size)
            self.blocks.append((self.squares[cut].view(rows, size),
                                self.directions[cut].view(rows, size),
                                self.p_norm[index:index + rows], self.d_norm[index:index + rows],
                                self.factors[index:index + rows].view(rows, 1)))
            offset, index = offset + rows * size, index + rows
        self.one = torch.ones((), dtype=dtype, device=device)
        self.ones_list = [self.one] * len(self.order)
        self.buffer: torch.Tensor | None = None
        self.buffers: list[torch.Tensor] = []
        if rule.momentum > 0:  # one flat buffer: μ·buf in one operator
            self.buffer = _flatten([state[p]["momentum"] for p in self.order])
            self.buffers = list(_unflatten(self.buffer, self.order))
            for param, view in zip(self.order, self.buffers):
                state[param]["momentum"] = view
            self.scaled_buffer = self.buffer[:length]
            self.plain_buffers = self.buffers[count:]

    @staticmethod
    def make(params: list[torch.Tensor], rule: Any,
             state: dict[torch.Tensor, Slots]) -> _LarsPlan | None:
        """The plan of ``params`` (all with a gradient), or None where it does not apply:
        an empty group, more than :data:`SMALL_PLAN` scaled elements (the scratch would
        outgrow the cache; :func:`_lars_group_step_` steps such a group tensor by tensor),
        or a member the plan cannot take (see the class). CPU only, as the member path of
        :class:`_FlatPlan`: the row-wise sums equal the per-tensor ones by ATen's CPU
        reduction; an accelerator's reduction kernels pick their order by shape, unchecked."""
        if not params:
            return None
        kind = _KIND(params[0])
        grads = list(map(_GRAD, params))
        if not (kind[0] in (torch.float32, torch.float64) and kind[1].type == "cpu"
                and all(map(operator.eq, map(_KIND, params), repeat(kind)))
                and all(map(operator.eq, map(_KIND, grads), repeat(kind)))
                and all(map(torch.Tensor.is_contiguous, params))
                and all(map(torch.Tensor.is_contiguous, grads))):
            return None
        scaled = sum(p.numel() for p in params if not (rule.exclude_1d and p.ndim <= 1))
        if scaled > SMALL_PLAN:
            return None
        return _LarsPlan(params, rule, state)

    def holds(self, params: list[torch.Tensor], rule: Any,
              state: dict[torch.Tensor, Slots]) -> bool:
        """Whether the plan still steps ``params`` (the same tensors, of the plan's dtype
        and device, contiguous, with contiguous gradients of it), under ``rule`` at this
        thread count, with every momentum buffer the plan's view."""
        kind = self.kind
        grads = list(map(_GRAD, params))
        if not (rule is self.rule and len(params) == len(self.params)
                and all(map(operator.is_, params, self.params))
                and self.threads == torch.get_num_threads()
                and all(map(operator.eq, map(_KIND, params), repeat(kind)))
                and all(map(operator.eq, map(_KIND, grads), repeat(kind)))
                and all(map(torch.Tensor.is_contiguous, params))
                and all(map(torch.Tensor.is_contiguous, grads))):
            return False
        if self.buffer is not None:
            try:
                found = [state[p]["momentum"] for p in self.order]
            except KeyError:
                return False
            return all(map(operator.is_, found, self.buffers))
        return True

    def step(self, rule: Any, lr: float) -> None:
        """One LARS step of the members with the learning rate ``lr``."""
        grads = [_grad(p) for p in self.order]
        count = len(self.scaled)
        if count:
            scaled_grads = grads[:count]
            squares, directions = self.squares, self.directions
            torch._foreach_copy_(self.square_views, self.scaled)
            squares.mul_(squares)
            for square_rows, _, p_sum, _, _ in self.blocks:
                torch.sum(square_rows, 1, out=p_sum)
            if rule.weight_decay > 0:  # d = g + wd·θ
                torch._foreach_copy_(self.direction_views, self.scaled)
                directions.mul_(rule.weight_decay)
                torch._foreach_add_(self.direction_views, scaled_grads)
            else:
                torch._foreach_copy_(self.direction_views, scaled_grads)
            torch.mul(directions, directions, out=squares)
            for square_rows, _, _, d_sum, _ in self.blocks:
                torch.sum(square_rows, 1, out=d_sum)
            # the core's 0-d operations on the vectors of norms, element-wise the same
            norms = self.norms.sqrt_()
            torch.all(torch.gt(norms, 0, out=self.positive), 0, out=self.scaled_mask)
            torch.where(self.scaled_mask, self.d_norm, self.ones, out=self.denominator)
            factors = torch.mul(self.p_norm, rule.trust_coefficient, out=self.factors)
            factors.div_(self.denominator)
            torch.where(self.scaled_mask, factors, self.ones, out=factors)
            for _, direction_rows, _, _, factor in self.blocks:
                direction_rows.mul_(factor)
        one = self.one
        if self.buffer is not None:  # buf ← μ·buf + lr·(d·q), θ ← θ - buf
            self.buffer.mul_(rule.momentum)
            if count:
                self.scaled_buffer.addcmul_(self.directions, one, value=lr)
            if self.plain:
                torch._foreach_addcmul_(self.plain_buffers, grads[count:],
                                        self.ones_list[count:], value=lr)
            torch._foreach_sub_(self.order, self.buffers)
        else:  # θ ← θ - lr·(d·q)
            torch._foreach_addcmul_(self.order, [*self.direction_views, *grads[count:]],
                                    self.ones_list, value=-lr)


#: ATen's grain of a reduction (``at::internal::GRAIN_SIZE``): on several threads a sum of
#: this many elements or more to one value is split between the threads and their partial
#: sums added, so its bits differ from those of a row of a row-wise sum (one thread per
#: row); under it, and on one thread, a row sums as the tensor alone.
_SUM_GRAIN = 32768


def _lars_factors(rule: Any, params: list[torch.Tensor], scratch: torch.Tensor
                  ) -> tuple[torch.Tensor, ...]:
    """The trust ratio q of each of ``params`` (contiguous, of one dtype and device) as 0-d
    tensors: the core's ``sum(θ·θ)`` and ``sum(d·d)`` per tensor through ``scratch`` (rows of
    the largest tensor's length: the square, and d where there is weight decay), then its 0-d
    operations on the vector of norms (element-wise the same)."""
    sums: list[torch.Tensor] = []
    for param in params:
        size = param.numel()
        square = scratch[0, :size].view(param.shape)
        d = (torch.mul(param, rule.weight_decay, out=scratch[1, :size].view(param.shape))
             .add_(_grad(param)) if rule.weight_decay > 0 else _grad(param))
        sums.append(torch.sum(torch.mul(param, param, out=square)))
        sums.append(torch.sum(torch.mul(d, d, out=square)))
    norms = torch.stack(sums).sqrt_().view(-1, 2)
    p_norm, d_norm = norms[:, 0], norms[:, 1]
    scaled = (p_norm > 0) & (d_norm > 0)
    ratio = rule.trust_coefficient * p_norm / torch.where(scaled, d_norm,
                                                         torch.ones_like(d_norm))
    return torch.where(scaled, ratio, torch.ones_like(ratio)).unbind()


def _lars_directions(rule: Any, params: list[torch.Tensor],
                     factors: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    """``d·q`` of each of ``params`` as new tensors (foreach operators)."""
    grads = [_grad(p) for p in params]
    if rule.weight_decay > 0:  # d anew (the same operations), then scaled in place
        directions = torch._foreach_mul(params, rule.weight_decay)
        torch._foreach_add_(directions, grads)
        torch._foreach_mul_(directions, factors)
        return list(directions)
    return list(torch._foreach_mul(grads, factors))


#: The base rule's ``rates``, which ignores the step (a rule keeping it needs no step read).
_STEPLESS_RATES = UpdateRule.rates


def _steps_alike(rule: UpdateRule, group: dict[str, Any], other: dict[str, Any],
                 group_rule: Callable[[dict[str, Any]], UpdateRule]) -> bool:
    """Whether ``other`` takes the same eager step as ``group`` (whose rule is ``rule``), so
    that one plan may hold the parameters of both: the same rule (hyper-parameters), the same
    number learning rate, rates that ignore the step, ClippedRule's update, which ignores
    whether a parameter is a loss's auxiliary (PESG's a, b: a plan less, some 12 operators
    a step; PDSCA leaves its auxiliaries alone in the cross-entropy phase), and a gradient
    for every parameter of both (a plan with a member short of one steps tensor by tensor:
    joined, the other group would too)."""
    lr = group["lr"]
    return (type(rule).update_param is _CLIPPED_UPDATE and type(rule).rates is _STEPLESS_RATES
            and isinstance(lr, float | int) and type(other["lr"]) is type(lr)
            and other["lr"] == lr and group_rule(other) is rule
            and all(map(operator.is_not, map(_GRAD, group["params"]), repeat(None)))
            and all(map(operator.is_not, map(_GRAD, other["params"]), repeat(None))))


def _grad(param: torch.Tensor) -> torch.Tensor:
    """The gradient of a parameter known to have one."""
    return cast(torch.Tensor, param.grad)


def _lars_kernel_applies(rule: UpdateRule, param: torch.Tensor, rates: Any) -> bool:
    """Whether :func:`_lars_step_` runs ``rule`` on ``param`` (LARS's own update_param, a
    float32/float64 parameter with a gradient of its dtype, a number learning rate)."""
    return (type(rule).update_param is xrisk.optim.LARS.update_param
            and param.dtype in (torch.float32, torch.float64)
            and param.grad is not None and param.grad.dtype == param.dtype
            and isinstance(rates.lr, int | float))


Kernel = Callable[..., dict[str, int]]
#: The in-place kernel of each core rule's update_param (used for rules whose update_param is
#: that one, on float32/float64 parameters with gradients of their dtype and number rates).
_KERNELS: tuple[tuple[Callable[..., Any], Kernel], ...] = (
    (xrisk.optim.ClippedRule.update_param, _clipped_step_),
    (xrisk.optim.PDSCA.update_param, _pdsca_step_),
)
_CLIPPED_DIRECTION = xrisk.optim.ClippedRule._direction
_CLIPPED_UPDATE = xrisk.optim.ClippedRule.update_param
_LARS_UPDATE = xrisk.optim.LARS.update_param


def _in_place_kernel(rule: UpdateRule, dtype: torch.dtype, grads: list[torch.Tensor],
                     rates: Any) -> Kernel | None:
    """The kernel of ``rule``, or None where the core rule must run (half-precision
    parameters computed in float32, gradients of another dtype, a tensor learning rate, a
    rule whose update_param or direction is its own)."""
    # Plain loops, no generators: this runs once per plan and step.
    if dtype is not torch.float32 and dtype is not torch.float64:
        return None
    for grad in grads:
        if grad.dtype != dtype:
            return None
    for rate in (rates.lr, rates.ce_lr, rates.ce_phase):
        if rate is not None and not isinstance(rate, (int, float)):
            return None
    return _rule_kernel(rule)


def _rule_kernel(rule: UpdateRule) -> Kernel | None:
    """The in-place kernel of ``rule``'s update_param, None for a rule whose update_param or
    direction is its own."""
    rule_type = type(rule)
    if getattr(rule_type, "_direction", None) not in (None, _CLIPPED_DIRECTION):
        return None
    method = rule_type.update_param
    for owner, kernel in _KERNELS:
        if method is owner:
            return kernel
    return None


def _member_kernel(rule: UpdateRule) -> Kernel | None:
    """The kernel of ``rule`` on a tile's members (see :class:`_Members`), or None."""
    kernel = _rule_kernel(rule)
    return None if kernel is None else _MEMBER_KERNELS.get(kernel)


#: Each tile kernel's counterpart on a tile's members.
_MEMBER_KERNELS: dict[Kernel, Kernel] = {
    _clipped_step_: _clipped_step_members_,
    _pdsca_step_: _pdsca_step_members_,
}


def _flat_view(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` as a vector in its logical order: a view when it is contiguous."""
    return tensor.view(-1) if tensor.is_contiguous() else tensor.reshape(-1)


def _tiles(sizes: list[int], tile: int) -> list[tuple[int, int, list[tuple[int, int, int]]]]:
    """Cut the flat range of members of ``sizes`` into consecutive ranges of at most
    ``tile`` elements: ``(start, stop, pieces)`` with each piece a ``(member, first, last)``
    slice of one member. Whole members that fit share a tile (gathered); a member that does
    not fit in the open tile closes it and starts its own, and one larger than ``tile`` is
    cut into tiles of its own (the last one shorter), so no tile gathers a piece of a member
    with others: a gathered piece is copied in, its gradient too, and copied back (at 1 M
    parameters a step of PESG took 0.88x, SGD 0.84x the time of tiles across members). At
    least one tile, possibly empty, so the counters move even for parameters without
    elements."""
    tiles: list[tuple[int, int, list[tuple[int, int, int]]]] = []
    pieces: list[tuple[int, int, int]] = []
    start = filled = 0
    for index, size in enumerate(sizes):
        if filled and size > tile - filled:  # it would straddle: a tile of its own
            tiles.append((start, start + filled, pieces))
            start, pieces, filled = start + filled, [], 0
        first = 0
        while first < size:
            last = min(size, first + tile - filled)
            pieces.append((index, first, last))
            filled += last - first
            first = last
            if filled == tile or (last == size and size > tile):  # full, or a cut member ends
                tiles.append((start, start + filled, pieces))
                start, pieces, filled = start + filled, [], 0
    if pieces or not tiles:
        tiles.append((start, start + filled, pieces or [(0, 0, 0)]))
    return tiles


def _make_plans(params: list[torch.Tensor], rule: UpdateRule,
                state: dict[torch.Tensor, dict[str, torch.Tensor]],
                zero_counters: dict[int, torch.Tensor]) -> list[_FlatPlan]:
    """One plan per (dtype, device, counter values) among ``params``. A counter the optimizer
    made is known to be 0 (``zero_counters``, consumed here: the plans' views replace it);
    any other is read (a device sync on an accelerator: only when plans are rebuilt after a
    ``load_state_dict``, a per-tensor or compiled step, never on the first step)."""
    names = [n for n, spec in rule.slot_specs().items() if spec.scalar and spec.integer]
    buckets: dict[tuple[Any, ...], list[torch.Tensor]] = {}
    for param in params:
        counters = tuple(0 if zero_counters.pop(id(state[param][n]), None) is state[param][n]
                         else int(state[param][n]) for n in names)
        buckets.setdefault((param.dtype, param.device, counters), []).append(param)
    return [_FlatPlan(members, rule, state, dict(zip(names, key[2])))
            for key, members in buckets.items()]


def _plans_match(members: tuple[torch.Tensor, ...], planned_rule: UpdateRule,
                 plans: list[_FlatPlan], params: list[torch.Tensor], rule: UpdateRule,
                 state: dict[torch.Tensor, dict[str, torch.Tensor]]) -> bool:
    """Whether ``plans`` (made for ``members`` under ``planned_rule``) still hold: the group
    has the same parameters, the rule the same slots, and every state entry is its view."""
    # C-level loops (map, all): this runs at every eager step.
    if len(members) != len(params) or not all(map(operator.is_, members, params)):
        return False
    if rule is not planned_rule and rule.slot_specs().keys() != planned_rule.slot_specs().keys():
        return False
    for plan in plans:
        if not plan.holds(state):
            return False
    return True


def _loss_containers(owner: str, loss_fn: Any, definition: Any) -> dict[str, torch.Tensor]:
    """The loss's auxiliaries (``nn.Parameter``\\ s), by the names its definition declares."""
    found = {name: getattr(loss_fn, name, None) for name in definition.auxiliaries()}
    containers = {n: c for n, c in found.items() if isinstance(c, torch.Tensor)}
    if len(containers) != len(found):
        raise TypeError(f"{owner}: loss_fn is {type(loss_fn).__name__}; expected an xrisk.torch "
                        f"loss holding its auxiliaries as tensors. Fix: {owner}(params, "
                        f"xrisk.torch.{definition.name}(...), ...).")
    return containers


# --- generated by tools/generate_adapters.py: edit the core (or a docstring), run it ---

class SOAP(XRiskOptimizer):
    """Optimizer of :class:`xrisk.APLoss` (average precision): clipped Adam by default. As a
    ``torch.optim.Optimizer``.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -1.0], dtype=torch.float64))
    >>> opt = xr.SOAP([w], learning_rate=0.1, mode="sgd")
    >>> w.grad = torch.tensor([0.5, 3.0], dtype=torch.float64)
    >>> opt.step()
    >>> w.detach().numpy().round(6).tolist()  # the gradient 3.0 is clipped to 1.0
    [0.949999, -1.099999]
    """

    rule_type = xrisk.SOAP

    def __init__(self, params: Params = None, *, learning_rate: float = 0.001, mode: str = "adam",
                 clip_value: float = 1.0, weight_decay: float = 1e-05, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.1,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.SOAP(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        super().__init__(rule, params)


class SOPA(XRiskOptimizer):
    """Optimizer of the one-way partial AUC by CVaR (pAUC_CVaR). As a
    ``torch.optim.Optimizer``."""

    rule_type = xrisk.SOPA

    def __init__(self, params: Params = None, *, learning_rate: float = 0.001, mode: str = "adam",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.SOPA(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        super().__init__(rule, params)


class SOPAs(XRiskOptimizer):
    """Optimizer of the one-way partial AUC by KL-DRO (pAUC_DRO); clips at 2. As a
    ``torch.optim.Optimizer``."""

    rule_type = xrisk.SOPAs

    def __init__(self, params: Params = None, *, learning_rate: float = 0.001, mode: str = "adam",
                 clip_value: float = 2.0, weight_decay: float = 1e-05, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.1,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.SOPAs(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        super().__init__(rule, params)


class SOTAs(XRiskOptimizer):
    """Optimizer of the two-way partial AUC by KL (tpAUC_KL). As a ``torch.optim.Optimizer``."""

    rule_type = xrisk.SOTAs

    def __init__(self, params: Params = None, *, learning_rate: float = 0.001, mode: str = "adam",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.SOTAs(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        super().__init__(rule, params)


class STACO(XRiskOptimizer):
    """Optimizer of the two-way partial AUC by double CVaR (tpAUC_CVaR). As a
    ``torch.optim.Optimizer``."""

    rule_type = xrisk.STACO

    def __init__(self, params: Params = None, *, learning_rate: float = 0.001, mode: str = "adam",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.STACO(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        super().__init__(rule, params)


class SONG(XRiskOptimizer):
    """Optimizer of NDCG (SONG, K-SONG) and listwise CE: clipped momentum SGD by default. As a
    ``torch.optim.Optimizer``."""

    rule_type = xrisk.SONG

    def __init__(self, params: Params = None, *, learning_rate: float, mode: str = "sgd",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.SONG(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        super().__init__(rule, params)


class SGD(XRiskOptimizer):
    """LibAUC's SGD: torch's momentum SGD on the clipped direction, with epoch decay. As a
    ``torch.optim.Optimizer``."""

    rule_type = xrisk.SGD

    def __init__(self, params: Params = None, *, learning_rate: float, clip_value: float = 1.0,
                 weight_decay: float = 0.0, epoch_decay: float = 0.0, momentum: float = 0.0,
                 nesterov: bool = False, dampening: float = 0.0) -> None:
        rule = xrisk.SGD(learning_rate=learning_rate, clip_value=clip_value,
                         weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                         nesterov=nesterov, dampening=dampening)
        super().__init__(rule, params)


class Adam(XRiskOptimizer):
    """LibAUC's Adam: Adam on the clipped direction (coupled L2), with epoch decay. As a
    ``torch.optim.Optimizer``."""

    rule_type = xrisk.Adam

    def __init__(self, params: Params = None, *, learning_rate: float = 0.001,
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.Adam(learning_rate=learning_rate, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        super().__init__(rule, params)


class AdamW(XRiskOptimizer):
    """LibAUC's AdamW: decoupled weight decay θ ← θ(1 - lr·weight_decay), then Adam on the
    clipped direction (clip 10 by default), with epoch decay. As a
    ``torch.optim.Optimizer``."""

    rule_type = xrisk.AdamW

    def __init__(self, params: Params = None, *, learning_rate: float = 0.001,
                 clip_value: float = 10.0, weight_decay: float = 0.01, epoch_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.AdamW(learning_rate=learning_rate, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        super().__init__(rule, params)


class LARS(XRiskOptimizer):
    """Layer-wise adaptive rate scaling (LARS) with momentum, the optimizer of the contrastive
    losses. As a ``torch.optim.Optimizer``.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> w = torch.nn.Parameter(torch.tensor([[3.0, 4.0]], dtype=torch.float64))
    >>> opt = xr.LARS([w], learning_rate=1.0, weight_decay=0.0, momentum=0.0,
    ...               trust_coefficient=0.1)
    >>> w.grad = torch.tensor([[0.0, 2.0]], dtype=torch.float64)
    >>> opt.step()
    >>> w.detach().numpy().tolist()  # the step's norm is 0.1 * |w| = 0.5
    [[3.0, 3.5]]
    """

    rule_type = xrisk.LARS

    def __init__(self, params: Params = None, *, learning_rate: float, weight_decay: float = 0.0,
                 momentum: float = 0.9, trust_coefficient: float = 0.001,
                 exclude_1d: bool = True) -> None:
        rule = xrisk.LARS(learning_rate=learning_rate, weight_decay=weight_decay, momentum=momentum,
                          trust_coefficient=trust_coefficient, exclude_1d=exclude_1d)
        super().__init__(rule, params)


class MIDAM(XRiskOptimizer):
    """Momentum descent-ascent for the multi-instance AUC losses (MIDAM). As a
    ``torch.optim.Optimizer``.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> model = torch.nn.Linear(2, 1)
    >>> loss_fn = xr.MIDAM_attention_pooling_loss(num_samples=4)
    >>> opt = xr.MIDAM(model.parameters(), loss_fn, learning_rate=0.1, momentum=0.9)
    >>> x = torch.randn(2, 3, 2)  # 2 bags, 3 instances each, 2 features
    >>> scores = model(x).squeeze(-1)  # instance scores; attention logits from the same model
    >>> loss_fn(scores, scores.detach(), torch.tensor([1, 0]), torch.tensor([0, 3])).backward()
    >>> opt.step()  # descent on the model's weights and a, b; then ascent on alpha
    >>> loss_fn.alpha.item() > 0
    True
    """

    rule_type = xrisk.MIDAM

    def __init__(self, params: Params = None, loss_fn: Loss = None, *, learning_rate: float,
                 momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        rule = xrisk.MIDAM(loss_fn, learning_rate=learning_rate, momentum=momentum,
                           weight_decay=weight_decay)
        super().__init__(rule, params, loss_fn)


class PDSCA(XRiskOptimizer):
    """Primal-dual stochastic compositional adaptive method for :class:`CompositionalAUCLoss`.
    As a ``torch.optim.Optimizer``.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> model = torch.nn.Linear(2, 1)
    >>> loss_fn = xr.CompositionalAUCLoss(k=1)
    >>> opt = xr.PDSCA(model.parameters(), loss_fn, learning_rate=0.1)
    >>> x, y = torch.randn(4, 2), torch.tensor([1, 0, 1, 0])
    >>> alphas = []
    >>> for _ in range(2):  # step 0: cross-entropy phase; step 1: AUC phase
    ...     opt.zero_grad()
    ...     loss_fn(torch.sigmoid(model(x)).squeeze(1), y).backward()
    ...     opt.step()
    ...     alphas.append(loss_fn.alpha.item())
    >>> alphas[0] == 0.0 and alphas[1] > 0
    True
    """

    rule_type = xrisk.PDSCA

    def __init__(self, params: Params = None, loss_fn: Loss = None, *, learning_rate: float = 0.1,
                 ce_learning_rate: float | None = None, beta1: float = 0.99, beta2: float = 0.999,
                 clip_value: float = 1.0, weight_decay: float = 1e-05,
                 epoch_decay: float = 0.002) -> None:
        rule = xrisk.PDSCA(loss_fn, learning_rate=learning_rate, ce_learning_rate=ce_learning_rate,
                           beta1=beta1, beta2=beta2, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay)
        super().__init__(rule, params, loss_fn)


class PESG(XRiskOptimizer):
    """Proximal epoch stochastic gradient descent-ascent (PESG) for min-max losses. As a
    ``torch.optim.Optimizer``.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> model = torch.nn.Linear(2, 1)
    >>> loss_fn = xr.AUCMLoss()
    >>> opt = xr.PESG(model.parameters(), loss_fn, learning_rate=0.1)
    >>> scores = torch.sigmoid(model(torch.randn(4, 2))).squeeze(1)
    >>> loss_fn(scores, torch.tensor([1, 0, 1, 0])).backward()
    >>> opt.step()  # descent on the model's weights and a, b; then ascent on alpha
    >>> loss_fn.alpha.item() > 0
    True
    """

    rule_type = xrisk.PESG

    def __init__(self, params: Params = None, loss_fn: Loss = None, *, learning_rate: float = 0.1,
                 mode: str = "sgd", clip_value: float = 1.0, weight_decay: float = 1e-05,
                 epoch_decay: float = 0.002, momentum: float = 0.9,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.PESG(loss_fn, learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          betas=betas, eps=eps, amsgrad=amsgrad)
        super().__init__(rule, params, loss_fn)


# --- end of the generated classes ---



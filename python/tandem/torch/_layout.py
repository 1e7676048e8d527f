"""The engine's tensors of a tandem.torch optimizer follow its param_groups: the
parameters that require grad, under their names and groups, rebound when param_groups
change, a parameter is reallocated or one left out gets a gradient (Note [Rebinding] in
_core/engine.py; RebindWarning).

Each call takes the optimizer's param_groups; a call that may bind also takes
``group_values()``, the groups' checked (lrs, hypers), and ``bound(before)``, what the
optimizer does after each bind (TandemOptimizer._bound)."""

import math

from tandem._core import engine as _engine
from tandem._core import options as _options
from tandem._core.warnings import RebindWarning, warn
from tandem.torch._optim_state import reference_values


class LayoutFollower:
    """param_groups -> the layout of `core`, the optimizer's front-end core. It keeps
    ``indices`` (each engine tensor's torch state_dict index), ``frozen`` ((label,
    parameter) of those left out), the reference values ``ref_group``, ``lr_scales``
    and ``engine_hyper`` (follow_values) and the count of ``rebinds``."""

    def __init__(self, core):
        self.core = core
        self.indices, self.frozen, self._structure = [], [], []
        self.ref_group = self.lr_scales = self.engine_hyper = None
        self.rebinds = 0
        self._rebind_step = None
        self._warned_rebind = 0

    def follow_values(self, lrs, hypers, hyperparam_update):
        """Keeps the reference values (the lr ratios to the group with the largest lr, and
        the other hyper-parameters) up to date with a step's. They only say what changed
        (the engine takes every group's values at each step): with
        hyperparam_update="error" a change raises ValueError naming it."""
        ref = lrs[self.ref_group]
        ratios_hold = all(math.isclose(lr, ref * s, rel_tol=1e-9, abs_tol=0.0)
                          for lr, s in zip(lrs, self.lr_scales))
        if ratios_hold and hypers == self.engine_hyper:
            return
        if hyperparam_update == "error":
            what = ("the ratio between the groups' learning rates changed (now %s, built "
                    "with ratios %s to group %d)" % (lrs, self.lr_scales, self.ref_group)
                    if not ratios_hold else
                    "a hyper-parameter other than lr changed (now %s, built with %s)"
                    % (hypers, self.engine_hyper))
            raise ValueError(what + "; pass hyperparam_update='restore' (the default) to "
                             "apply such changes.")
        self.ref_group, self.lr_scales, self.engine_hyper = reference_values(lrs, hypers)

    def bind(self, groups, include, group_values, bound, fresh_values=False):
        """Binds the engine to the parameters of `groups` for which include(p) holds, then
        follows them; returns the core's (added, moved)."""
        entries, indices, left_out = _options.layout(groups, include)
        if not entries:
            raise _options.no_steppable_parameter(left_out, _engine.DTYPE_NAMES)
        lrs, hypers = group_values()
        before = set(self.core.index_by_id)
        added, moved = self.core.bind(entries, hypers)
        if fresh_values:
            self.ref_group, self.lr_scales, self.engine_hyper = reference_values(lrs, hypers)
        self.indices, self.frozen = indices, left_out
        self._structure = [list(group["params"]) for group in groups]
        bound(before)
        return added, moved

    def _structure_changed(self, groups):
        """Whether param_groups hold other parameters (or groups) than the layout's."""
        if len(groups) != len(self._structure):
            return True
        for group, known in zip(groups, self._structure):
            params = group.get("params") if isinstance(group, dict) else None
            if (not isinstance(params, (list, tuple)) or len(params) != len(known)
                    or any(a is not b for a, b in zip(params, known))):
                return True
        return False

    def pending(self, groups):
        """Whether the next step rebinds (HandOver.hand_over asks)."""
        return (self._structure_changed(groups) or bool(self._joining(anticipate=True))
                or any(self.core.moved(k) for k in range(len(self.core.params))))

    def _joining(self, anticipate):
        """The ids of the parameters left out that require grad and have a gradient (with
        ``anticipate``: that require grad)."""
        return {id(p) for _where, p in self.frozen
                if p.requires_grad and (anticipate or p.grad is not None)}

    def rebind_if_needed(self, groups, group_values, bound, anticipate=False, added=True,
                         follow=True):
        """Rebinds the engine when param_groups changed (with ``follow``), a parameter
        left out now has a gradient (with ``added``; with ``anticipate``: requires grad)
        or an engine parameter was reallocated. A no-op while the engine's step is
        begun; nothing changes when it raises."""
        if self.core.step_begun:
            return
        structure = follow and self._structure_changed(groups)
        new = self._joining(anticipate) if added and not structure else set()
        self.rebind(groups, group_values, bound, new, structure)

    def rebind(self, groups, group_values, bound, new_ids, structure=False):
        """Rebinds for new_ids (parameters to take in), a param_groups change or a
        reallocation, when there is one. After a param_groups change every parameter
        that requires grad is in the engine, as at construction."""
        core = self.core
        moved = core.reallocated()
        if not new_ids and not moved and not structure:
            return
        if structure:
            _options.check_structure(groups)

        def include(p):
            return (id(p) in core.index_by_id or id(p) in new_ids
                    or (structure and (id(p) in core.retired or p.requires_grad)))
        added, moved = self.bind(groups, include, group_values, bound, fresh_values=structure)
        self.rebinds += 1
        self._warn_rebind(len(added), len(moved), structure)

    def stated(self, groups, state_dict):
        """The ids of the parameters outside the engine that `state_dict` holds state for
        (resuming progressive unfreezing)."""
        state = state_dict.get("state") if isinstance(state_dict, dict) else None
        if not isinstance(state, dict):
            return set()
        params = [p for group in groups for p in group["params"]]
        return {id(params[i]) for i in state if isinstance(i, int) and 0 <= i < len(params)
                and id(params[i]) not in self.core.index_by_id}

    def _warn_rebind(self, added, moved, structure):
        """Warns at the first rebind, and once more if rebinds come at consecutive steps
        (a loop that reallocates parameters every step)."""
        step = self.core.step_count
        repeated = self._rebind_step is not None and step - self._rebind_step <= 1
        self._rebind_step = step
        if self._warned_rebind == 0 or (repeated and self._warned_rebind == 1):
            self._warned_rebind += 1
            what = []
            if structure:
                what.append("param_groups changed (parameters added or removed, "
                            "add_param_group)")
            elif added:
                what.append("%d parameter(s) frozen at construction got a gradient (or "
                            "state from a state dict)" % added)
            if moved:
                what.append("%d parameter(s) were reallocated (model.to(), p.data = ...)"
                            % moved)
            warn("tandem: %s; the optimizer rebuilt its engine over the current "
                 "parameters, copying its whole state (a full snapshot and restore)%s. "
                 "Fine once; build the optimizer after moving the model, with every "
                 "group, to avoid it." % ("; ".join(what), ", at consecutive steps: "
                                          "something reallocates parameters every step"
                                          if repeated else ""), RebindWarning)

    def check_begun(self, groups):
        """With the engine's step begun: refuses param_groups changed or a parameter
        unfrozen since begin_step."""
        if not self.core.step_begun:
            return
        if self._structure_changed(groups):
            raise ValueError("param_groups changed (parameters added or removed, "
                             "add_param_group) between begin_step() and step(); change "
                             "them before begin_step()")
        for where, p in self.frozen:
            if p.grad is not None and p.requires_grad:
                raise ValueError(
                    "parameter %s (shape %s, %s) was unfrozen between begin_step() and "
                    "step(), so it has no optimizer state in this step; unfreeze it before "
                    "begin_step()" % (where, tuple(p.shape), p.dtype))

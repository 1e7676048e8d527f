"""The engine's tensors of a tandem.torch optimizer follow its param_groups: which
parameters the engine steps (those that require grad, as at construction, and those
left out that get a gradient later), under which names and groups, and the rebinds that
follow changes (parameters appended or removed, add_param_group, reallocations,
unfreezing), each keeping the state of the others bit for bit (Note [Rebinding] in
_core/engine.py) and warned (RebindWarning).

The optimizer hands each call its param_groups; a call that may bind also takes
``group_values()``, the groups' (lrs, hypers), checked, and ``bound(before)``, what the
optimizer does after each bind (``before``: the ids of the engine's parameters before
it)."""

import math

from tandem._core import engine as _engine
from tandem._core import options as _options
from tandem._core.warnings import RebindWarning, warn
from tandem.torch._optim_state import reference_values


class LayoutFollower:
    """param_groups -> the engine's layout (see the module docstring), over `core` (the
    optimizer's front-end core). It keeps ``indices`` (each engine tensor's torch
    state_dict index), ``frozen`` ((label, parameter) of those left out), the groups'
    reference values ``ref_group``, ``lr_scales`` and ``engine_hyper`` (follow_values)
    and ``rebinds``, how many rebinds there were."""

    def __init__(self, core):
        self.core = core
        self.indices, self.frozen, self._structure = [], [], []
        self.ref_group = self.lr_scales = self.engine_hyper = None
        self.rebinds = 0
        self._rebind_step = None
        self._warned_rebind = 0

    def follow_values(self, lrs, hypers, hyperparam_update):
        """Keeps the groups' reference values (_ref_group, _lr_scales, _engine_hyper: the
        lr ratios to the group with the largest lr, and the other hyper-parameters) up to
        date with a step's; the engine takes every group's values at each step anyway
        (Note [Each group's values every step] in _core/engine.py), so these only say what
        changed: with hyperparam_update="error" a change raises ValueError naming it, and
        state dicts and checkpoint files record them for their readers."""
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
        """Binds the engine to the parameters of param_groups `groups` for which
        include(p) holds (the core carries the state by identity: Note [Rebinding] in
        _core/engine.py), then the tables that follow the layout: torch indices, the
        parameters left out, param_groups' shape; then bound(before)."""
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
        """Whether param_groups hold other parameters (or groups) than the engine's layout
        follows."""
        if len(groups) != len(self._structure):
            return True
        for group, known in zip(groups, self._structure):
            params = group.get("params") if isinstance(group, dict) else None
            if not isinstance(params, (list, tuple)) or len(params) != len(known):
                return True
            if any(a is not b for a, b in zip(params, known)):
                return True
        return False

    def pending(self, groups):
        """Whether the next step rebinds (param_groups changed, a parameter left out
        requires grad, an engine parameter was reallocated): checked at the first
        gradient a step hands over early."""
        if self._structure_changed(groups) or self._joining(anticipate=True):
            return True
        return any(self.core.moved(k) for k in range(len(self.core.params)))

    def _joining(self, anticipate):
        """The ids of the parameters left out that the next rebind takes in: those that
        require grad and have a gradient (with ``anticipate``: that require grad)."""
        return {id(p) for _where, p in self.frozen
                if p.requires_grad and (anticipate or p.grad is not None)}

    def rebind_if_needed(self, groups, group_values, bound, anticipate=False, added=True,
                         follow=True):
        """Rebinds the engine when param_groups changed (with ``follow``: parameters added
        or removed, add_param_group), a parameter left out now has a gradient (with
        ``added``: unfrozen after construction; with ``anticipate``, from begin_step, one
        that requires grad: its gradient comes in the backward that follows) or an engine
        parameter was reallocated (same shape and dtype). A no-op while the engine's step
        is begun. Nothing changes when it raises."""
        if self.core.step_begun:
            return
        structure = follow and self._structure_changed(groups)
        new = self._joining(anticipate) if added and not structure else set()
        self.rebind(groups, group_values, bound, new, structure)

    def rebind(self, groups, group_values, bound, new_ids, structure=False):
        """Rebinds for new_ids (parameters to take in), a param_groups change or a
        reallocation, when there is one; warns (RebindWarning). After a param_groups
        change every parameter that requires grad is in the engine, as at construction,
        and the groups' reference values start again (follow_values)."""
        core = self.core
        moved = core.reallocated()
        if not new_ids and not moved and not structure:
            return
        if structure:
            _options.check_structure(groups)
        if structure:
            def include(p):
                return (id(p) in core.index_by_id or id(p) in new_ids or id(p) in core.retired
                        or p.requires_grad)
        else:
            def include(p):
                return id(p) in core.index_by_id or id(p) in new_ids
        added, moved = self.bind(groups, include, group_values, bound, fresh_values=structure)
        self.rebinds += 1
        self._warn_rebind(len(added), len(moved), structure)

    def stated(self, groups, state_dict):
        """The ids of the parameters outside the engine that state dict `state_dict` holds
        state for (written after they were unfrozen: resuming progressive unfreezing)."""
        state = state_dict.get("state") if isinstance(state_dict, dict) else None
        new = set()
        if isinstance(state, dict):
            params = [p for group in groups for p in group["params"]]
            for i in state:
                if (isinstance(i, int) and 0 <= i < len(params)
                        and id(params[i]) not in self.core.index_by_id):
                    new.add(id(params[i]))
        return new

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
        """Reached with the engine's step begun (otherwise rebind_if_needed has followed
        param_groups): refuse to silently skip or step a parameter torch.optim would
        treat otherwise."""
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

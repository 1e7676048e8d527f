"""The engine's tensors of a tandem.torch optimizer follow its param_groups: which
parameters the engine steps (those that require grad, as at construction, and those
left out that get a gradient later), under which names and groups, and the rebinds that
follow changes (parameters appended or removed, add_param_group, reallocations,
unfreezing), each keeping the state of the others bit for bit (Note [Rebinding] in
_engine.py) and warned (RebindWarning). A mixin of TandemOptimizer, which owns
``self._core`` (the front-end core) and ``self.param_groups``."""

import math

from tandem import _engine
from tandem import _options
from tandem._hooks import GradHooks
from tandem._torch_handover import _LIVE
from tandem._warnings import RebindWarning, warn


class LayoutFollower:
    """param_groups -> the engine's layout (see the module docstring)."""

    def _group_values(self, groups=None):
        """(lrs, hypers) of every group (default: param_groups), each checked
        (_options.group_values)."""
        checked = [_options.group_values(self._ALGORITHM, self._hyper, g, group)
                   for g, group in enumerate(self.param_groups if groups is None else groups)]
        return [lr for lr, _ in checked], [h for _, h in checked]

    def _follow_values(self, lrs, hypers):
        """Keeps the groups' reference values (_ref_group, _lr_scales, _engine_hyper: the
        lr ratios to the group with the largest lr, and the other hyper-parameters) up to
        date with a step's; the engine takes every group's values at each step anyway
        (Note [Each group's values every step] in _engine.py), so these only say what
        changed: with hyperparam_update="error" a change raises ValueError naming it, and
        state dicts and checkpoint files record them for their readers."""
        ref = lrs[self._ref_group]
        ratios_hold = all(math.isclose(lr, ref * s, rel_tol=1e-9, abs_tol=0.0)
                          for lr, s in zip(lrs, self._lr_scales))
        if ratios_hold and hypers == self._engine_hyper:
            return
        if self.hyperparam_update == "error":
            what = ("the ratio between the groups' learning rates changed (now %s, built "
                    "with ratios %s to group %d)" % (lrs, self._lr_scales, self._ref_group)
                    if not ratios_hold else
                    "a hyper-parameter other than lr changed (now %s, built with %s)"
                    % (hypers, self._engine_hyper))
            raise ValueError(what + "; pass hyperparam_update='restore' (the default) to "
                             "apply such changes.")
        self._ref_group, self._lr_scales, self._engine_hyper = reference_values(lrs, hypers)

    def _bind(self, include, fresh_values=False):
        """Binds the engine to the parameters of param_groups for which include(p) holds
        (the core carries the state by identity: Note [Rebinding] in _engine.py), then
        the tables that follow the layout: torch indices, the parameters left out,
        param_groups' shape, hooks and torch's per-parameter state entries."""
        entries, indices, left_out = _options.layout(self.param_groups, include)
        if not entries:
            raise _options.no_steppable_parameter(left_out, _engine.DTYPE_NAMES)
        lrs, hypers = self._group_values()
        before = set(self._core.index_by_id)
        added, moved = self._core.bind(entries, hypers)
        if fresh_values:
            self._ref_group, self._lr_scales, self._engine_hyper = reference_values(lrs, hypers)
        self._indices, self._frozen = indices, left_out
        self._structure = [list(group["params"]) for group in self.param_groups]
        if self._hooks is not None:
            self._hooks.remove()
        self._hooks = GradHooks(self, self._core.params, self.early_start,
                                "_on_grad_arriving", "_on_grad_accumulated")
        self._follow_copies()
        # torch.distributed.checkpoint runs a step with zero gradients to create the state
        # of an optimizer whose `state` is empty; Tandem's state exists from the start.
        for p in list(self.state):
            if id(p) in before and id(p) not in self._core.index_by_id:
                del self.state[p]
        for p in self._core.params:
            self.state.setdefault(p, {})
        _LIVE.add(self)  # the release check (_torch_handover.py)
        return added, moved

    def _structure_changed(self):
        """Whether param_groups hold other parameters (or groups) than the engine's layout
        follows."""
        groups = self.param_groups
        if len(groups) != len(self._structure):
            return True
        for group, known in zip(groups, self._structure):
            params = group.get("params") if isinstance(group, dict) else None
            if not isinstance(params, (list, tuple)) or len(params) != len(known):
                return True
            if any(a is not b for a, b in zip(params, known)):
                return True
        return False

    def _layout_pending(self):
        """Whether the next step rebinds (param_groups changed, a parameter left out
        requires grad, an engine parameter was reallocated): checked at the first
        gradient a step hands over early."""
        if self._structure_changed() or self._joining(anticipate=True):
            return True
        return any(self._core.moved(k) for k in range(len(self._core.params)))

    def _joining(self, anticipate):
        """The ids of the parameters left out that the next rebind takes in: those that
        require grad and have a gradient (with ``anticipate``: that require grad)."""
        return {id(p) for _where, p in self._frozen
                if p.requires_grad and (anticipate or p.grad is not None)}

    def _rebind_if_needed(self, anticipate=False, added=True, follow=True):
        """Rebinds the engine when param_groups changed (with ``follow``: parameters added
        or removed, add_param_group), a parameter left out now has a gradient (with
        ``added``: unfrozen after construction; with ``anticipate``, from begin_step, one
        that requires grad: its gradient comes in the backward that follows) or an engine
        parameter was reallocated (same shape and dtype). A no-op while the engine's step
        is begun. Nothing changes when it raises."""
        self._hooks.hook_pending()
        if self._core.step_begun:
            return
        structure = follow and self._structure_changed()
        new = self._joining(anticipate) if added and not structure else set()
        self._rebind(new, structure)

    def _rebind(self, new_ids, structure=False):
        """Rebinds for new_ids (parameters to take in), a param_groups change or a
        reallocation, when there is one; warns (RebindWarning). After a param_groups
        change every parameter that requires grad is in the engine, as at construction,
        and the groups' reference values start again (_follow_values)."""
        moved = self._core.reallocated()
        if not new_ids and not moved and not structure:
            return
        if structure:
            _options.check_structure(self.param_groups)
        core = self._core
        if structure:
            def include(p):
                return (id(p) in core.index_by_id or id(p) in new_ids or id(p) in core.retired
                        or p.requires_grad)
        else:
            def include(p):
                return id(p) in core.index_by_id or id(p) in new_ids
        added, moved = self._bind(include, fresh_values=structure)
        self.rebinds += 1
        self._warn_rebind(len(added), len(moved), structure)

    def _rebind_for_load(self, state_dict=None):
        """Before load_state_dict/load_checkpoint: follows param_groups and reallocations
        (the restore writes the weights through the engine's pointers), and, for a state
        dict that holds state for parameters outside the engine (written after they were
        unfrozen: resuming progressive unfreezing), takes those in first, so that the
        tensor sets match."""
        if self._core.step_begun:
            return
        self._rebind_if_needed(added=False)
        state = state_dict.get("state") if isinstance(state_dict, dict) else None
        new = set()
        if isinstance(state, dict):
            params = [p for group in self.param_groups for p in group["params"]]
            for i in state:
                if (isinstance(i, int) and 0 <= i < len(params)
                        and id(params[i]) not in self._core.index_by_id):
                    new.add(id(params[i]))
        self._rebind(new)

    def _warn_rebind(self, added, moved, structure):
        """Warns at the first rebind, and once more if rebinds come at consecutive steps
        (a loop that reallocates parameters every step)."""
        step = self._core.step_count
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

    def _check_begun(self):
        """Reached with the engine's step begun (otherwise _rebind_if_needed has followed
        param_groups): refuse to silently skip or step a parameter torch.optim would
        treat otherwise."""
        if not self._core.step_begun:
            return
        if self._structure_changed():
            raise ValueError("param_groups changed (parameters added or removed, "
                             "add_param_group) between begin_step() and step(); change "
                             "them before begin_step()")
        for where, p in self._frozen:
            if p.grad is not None and p.requires_grad:
                raise ValueError(
                    "parameter %s (shape %s, %s) was unfrozen between begin_step() and "
                    "step(), so it has no optimizer state in this step; unfreeze it before "
                    "begin_step()" % (where, tuple(p.shape), p.dtype))


def reference_values(lrs, hypers):
    """(ref_group, lr_scales, hypers): the group with the largest lr, each group's lr
    ratio to it, and the hyper-parameters (LayoutFollower._follow_values)."""
    ref_group = max(range(len(lrs)), key=lambda i: lrs[i])
    ref = lrs[ref_group]
    return ref_group, [(lr / ref if ref > 0 else 1.0) for lr in lrs], [dict(h) for h in hypers]

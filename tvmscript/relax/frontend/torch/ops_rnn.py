"""Converters of recurrent layers: ``nn.LSTM`` (``aten.lstm.input``), unrolled over time (a mixin
of `base.BaseTranslator`).

Relax has no loop over a sequence, so an LSTM becomes its cells, one per time step, layer and
direction, as TVM's importer writes it: the step's gates from two matmuls, sigmoid and tanh, the
new cell and hidden state. The input's projection ``x @ W_ih.T + b_ih + b_hh`` does not depend
on the previous step, so it is one matmul over the whole sequence, each step taking its row.
The sequence length must therefore be static.
"""

from __future__ import annotations

from .... import relax
from ....ir.op import api as _op


class RNNOps:
    """The LSTM converters."""

    def _lstm(self, node):
        # aten.lstm.input(input, hx, params, has_biases, num_layers, dropout, train,
        #                 bidirectional, batch_first) -> (output, h_n, c_n)
        if self.arg(node, 6, "train", False) and self.arg(node, 5, "dropout", 0.0):
            raise self.unsupported(node, "dropout between layers in training mode")
        hx = self.arg(node, 1, "hx")
        return self.lstm(node, self.arg(node, 0, "input"), list(hx) if hx else None,
                         list(self.arg(node, 2, "params")), bool(self.arg(node, 3, "has_biases", True)),
                         int(self.arg(node, 4, "num_layers", 1)), bool(self.arg(node, 7, "bidirectional", False)),
                         bool(self.arg(node, 8, "batch_first", False)))

    def lstm(self, node, x, hx, params: list, has_biases: bool, num_layers: int, bidirectional: bool,
             batch_first: bool):
        """``(output, h_n, c_n)`` of a (stacked, maybe bidirectional) LSTM, as ``nn.LSTM``
        computes them. ``params`` lists each layer's directions' ``W_ih, W_hh[, b_ih, b_hh]
        [, W_hr]`` (``W_hr`` with ``proj_size``); ``hx`` is ``[h_0, c_0]``, zeros when None."""
        if self.ndim(x) != 3:
            raise self.unsupported(node, f"a {self.ndim(x)}-d input (unbatched sequences are not supported)")
        directions = 2 if bidirectional else 1
        per_direction, rest = divmod(len(params), num_layers * directions)
        if rest or per_direction not in ((4, 5) if has_biases else (2, 3)):
            raise self.unsupported(
                node, f"{len(params)} weights for {num_layers} layer(s) of {directions} direction(s)")
        if batch_first:
            x = self.emit(_op.permute_dims(x, axes=[1, 0, 2]))
        steps, batch, _ = self.shape_of(x)
        if not isinstance(steps, int):
            raise self.unsupported(node, "a symbolic sequence length (the LSTM is unrolled over its steps)")
        dtype = self.dtype_of(x)
        h_n, c_n = [], []
        for layer in range(num_layers):
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                weights = params[k * per_direction:(k + 1) * per_direction]
                w_ih, w_hh = weights[:2]
                biases = weights[2:4] if has_biases else []
                w_hr = weights[-1] if per_direction in (3, 5) else None
                hidden = self.shape_of(w_hh)[1]
                cells = self.shape_of(w_hh)[0] // 4
                h = self.initial_state(hx, 0, k, [batch, hidden], dtype)
                c = self.initial_state(hx, 1, k, [batch, cells], dtype)
                out, h, c = self.lstm_direction(x, w_ih, w_hh, biases, w_hr, h, c, reverse=direction == 1)
                outputs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outputs[0] if directions == 1 else self.emit(_op.concat(outputs, axis=-1))
        if batch_first:
            x = self.emit(_op.permute_dims(x, axes=[1, 0, 2]))
        return x, self.stack(h_n, 0), self.stack(c_n, 0)

    def initial_state(self, hx, which: int, k: int, shape: list, dtype: str):
        """Layer-direction ``k``'s initial hidden (``which`` 0) or cell (1) state."""
        if hx is None:
            return self.emit(_op.zeros(shape, dtype))
        return self.emit(_op.take(hx[which], self.const(k, "int64"), axis=0))

    def lstm_direction(self, x, w_ih, w_hh, biases: list, w_hr, h, c, reverse: bool):
        """One layer in one direction over the time-major sequence ``x``: its outputs in time
        order, stacked, and the last hidden and cell states."""
        dtype = self.product_dtype(x)
        projected = self.emit(_op.matmul(x, self.emit(_op.permute_dims(w_ih, axes=None)), out_dtype=dtype))
        for b in biases:
            projected = self.emit(_op.add(projected, b))
        w_hh_t = self.emit(_op.permute_dims(w_hh, axes=None))
        w_hr_t = self.emit(_op.permute_dims(w_hr, axes=None)) if w_hr is not None else None
        steps = self.shape_of(x)[0]
        outputs = [None] * steps
        for t in (reversed(range(steps)) if reverse else range(steps)):
            step = self.emit(_op.take(projected, self.const(t, "int64"), axis=0))
            gates = self.emit(_op.add(step, self.emit(_op.matmul(h, w_hh_t, out_dtype=dtype))))
            split = self.emit(_op.split(gates, indices_or_sections=4, axis=-1))
            i, f, g, o = (self.emit(relax.TupleGetItem(split, n)) for n in range(4))
            i, f, o = (self.emit(_op.sigmoid(v)) for v in (i, f, o))
            g = self.emit(_op.tanh(g))
            c = self.emit(_op.add(self.emit(_op.multiply(f, c)), self.emit(_op.multiply(i, g))))
            h = self.emit(_op.multiply(o, self.emit(_op.tanh(c))))
            if w_hr_t is not None:
                h = self.emit(_op.matmul(h, w_hr_t, out_dtype=dtype))
            outputs[t] = h
        return self.stack(outputs, 0), h, c

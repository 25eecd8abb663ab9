// Frames drawn from the env's state, for envs whose export has no render.onnx.
// Each drawer gets the canvas's 2d context, its size and `s(name)`: the number in the
// state tensor `state_<name>` (the names of fxrl's state dataclasses). Pictures follow
// gymnasium's classic-control renderings.
"use strict";

const FXRL_DRAWERS = {
  "CartPole-v1": (ctx, w, h, s) => {
    const xMax = s("params_x_threshold");
    const scale = w / (2 * xMax * 1.25);
    const groundY = h * 0.75;
    const cartX = w / 2 + s("x") * scale;
    const poleLen = 2 * s("params_length") * scale;
    ctx.strokeStyle = "#000";
    ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(0, groundY); ctx.lineTo(w, groundY); ctx.stroke();
    ctx.fillStyle = "#000";
    ctx.fillRect(cartX - 25, groundY - 15, 50, 30);
    const theta = s("theta");
    ctx.strokeStyle = "rgb(202,152,101)";
    ctx.lineWidth = 10;
    ctx.lineCap = "butt";
    ctx.beginPath();
    ctx.moveTo(cartX, groundY - 8);
    ctx.lineTo(cartX + poleLen * Math.sin(theta), groundY - 8 - poleLen * Math.cos(theta));
    ctx.stroke();
    ctx.fillStyle = "rgb(129,132,203)";
    ctx.beginPath(); ctx.arc(cartX, groundY - 8, 5, 0, 2 * Math.PI); ctx.fill();
  },
  "Acrobot-v1": (ctx, w, h, s) => {
    const l1 = s("params_link_length_1"), l2 = 1.0;  // gymnasium's LINK_LENGTH_2
    const scale = Math.min(w, h) / (2 * (l1 + l2 + 0.2));
    const X = (x) => w / 2 + x * scale, Y = (y) => h / 2 - y * scale;
    const t1 = s("theta1"), t2 = s("theta2");
    const p1 = [l1 * Math.sin(t1), -l1 * Math.cos(t1)];
    const p2 = [p1[0] + l2 * Math.sin(t1 + t2), p1[1] - l2 * Math.cos(t1 + t2)];
    ctx.strokeStyle = "#000"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(X(-2.2), Y(1)); ctx.lineTo(X(2.2), Y(1)); ctx.stroke();
    ctx.strokeStyle = "rgb(0,204,204)"; ctx.lineWidth = 10; ctx.lineCap = "round";
    ctx.beginPath(); ctx.moveTo(X(0), Y(0)); ctx.lineTo(X(p1[0]), Y(p1[1]));
    ctx.lineTo(X(p2[0]), Y(p2[1])); ctx.stroke();
    ctx.fillStyle = "rgb(204,204,0)";
    for (const [x, y] of [[0, 0], p1]) {
      ctx.beginPath(); ctx.arc(X(x), Y(y), 5, 0, 2 * Math.PI); ctx.fill();
    }
  },
  "Pendulum-v1": (ctx, w, h, s) => {
    const scale = Math.min(w, h) / 2.2 / 1.2;
    const cx = w / 2, cy = h / 2, a = s("angle");
    const tip = [cx - scale * Math.sin(a), cy - scale * Math.cos(a)];  // angle 0 is upright
    ctx.strokeStyle = "rgb(204,77,77)"; ctx.lineWidth = 0.2 * scale; ctx.lineCap = "round";
    ctx.beginPath(); ctx.moveTo(cx, cy); ctx.lineTo(tip[0], tip[1]); ctx.stroke();
    ctx.fillStyle = "#000";
    ctx.beginPath(); ctx.arc(cx, cy, 0.05 * scale, 0, 2 * Math.PI); ctx.fill();
  },
};

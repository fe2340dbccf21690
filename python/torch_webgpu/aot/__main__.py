"""python -m torch_webgpu.aot export MODULE:FACTORY --input-shape 1,3,32,32 [...] --out DIR
python -m torch_webgpu.aot web DIR OUT   (web bundle of an exported program, for web/player.js)
python -m torch_webgpu.aot convert MODEL.pte --out DIR   (an ExecuTorch .pte, portable ops)

MODULE:FACTORY names a function returning the model (an nn.Module in eval mode is
exported as it is); each --input-shape adds a float32 example input (random values;
shapes are static in the exported program)."""
import argparse
import importlib
import sys

import torch

from . import convert_pte, export, export_web


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_webgpu.aot")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="export a model to program.json + weights.bin")
    ex.add_argument("model", help="module:function returning the model")
    ex.add_argument("--input-shape", action="append", required=True,
                    help="comma-separated shape of one float32 example input")
    ex.add_argument("--input-dtype", action="append", default=[],
                    help="dtype of the matching input (default float32)")
    ex.add_argument("--out", required=True, help="output directory")
    ex.add_argument("--web", metavar="WEB_DIR", help="also write the web bundle there")
    web = sub.add_parser("web", help="write the web bundle (bundle.json + buffers.bin) of "
                                     "an exported program")
    web.add_argument("dir", help="directory with program.json (+ weights.bin)")
    web.add_argument("out", help="output directory of the bundle")
    conv = sub.add_parser("convert", help="convert an ExecuTorch .pte to program.json + weights.bin")
    conv.add_argument("pte", help="the .pte file (to_edge(...).to_executorch(), no delegates)")
    conv.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    if args.command == "convert":
        program = convert_pte(args.pte, args.out)
        print(f"wrote {args.out}/program.json ({len(program['chain'])} ops, "
              f"{len(program['memoryPlan']['pools'])} pools) and {args.out}/weights.bin "
              f"({program['weights']['size']} bytes)")
        return
    if args.command == "web":
        export_web(args.dir, args.out)
        print(f"wrote {args.out}/bundle.json and {args.out}/buffers.bin")
        return
    module_name, _, attr = args.model.partition(":")
    if not attr:
        parser.error("model must be given as module:function")
    sys.path.insert(0, ".")
    factory = getattr(importlib.import_module(module_name), attr)
    model = factory()
    inputs = []
    for i, shape in enumerate(args.input_shape):
        dims = [int(s) for s in shape.split(",") if s]
        dtype = getattr(torch, args.input_dtype[i]) if i < len(args.input_dtype) else torch.float32
        if dtype.is_floating_point:
            inputs.append(torch.randn(dims, dtype=dtype))
        else:
            inputs.append(torch.zeros(dims, dtype=dtype))
    program = export(model, tuple(inputs), args.out)
    print(f"wrote {args.out}/program.json ({len(program['chain'])} ops, "
          f"{len(program['memoryPlan']['pools'])} pools) and {args.out}/weights.bin "
          f"({program['weights']['size']} bytes)")
    if args.web:
        export_web(args.out, args.web)
        print(f"wrote {args.web}/bundle.json and {args.web}/buffers.bin")


if __name__ == "__main__":
    main()

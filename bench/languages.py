"""Language benchmark: each compiled language's run with its build compiled now (a new source every
time: what every run cost before the compile cache) against a run whose identical source was
compiled before (the cache's hit), and each interpreted language's run.

    .venv/bin/python bench/languages.py [--repeats 5]

Prints a Markdown table of medians over --repeats runs, for the languages usable here.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from dojo.sandbox import AsyncSandbox, Limits, Program, Verdict
from dojo.sandbox.errors import LanguageUnavailable
from dojo.sandbox.languages import LANGUAGES, resolve_toolchain

HELLO = {
    "c": ('#include <stdio.h>\nint main(void){puts("42");return 0;}\n', "/* {n} */\n"),
    "cpp": ("#include <iostream>\nint main(){std::cout<<42<<std::endl;}\n", "// {n}\n"),
    "go": ('package main\nimport "fmt"\nfunc main(){ fmt.Println(42) }\n', "// {n}\n"),
    "rust": ('fn main() { println!("42"); }\n', "// {n}\n"),
    "java": ("public class Main { public static void main(String[] a) { System.out.println(42); } }\n", "// {n}\n"),
    "csharp": ('public class Program { public static void Main() { Console.WriteLine("42"); } }\n', "// {n}\n"),
    "d": ("import std.stdio;\nvoid main() { writeln(42); }\n", "// {n}\n"),
    "scala": ("object Main { def main(a: Array[String]): Unit = println(42) }\n", "// {n}\n"),
    "python": ("print(42)\n", "# {n}\n"),
    "javascript": ("console.log(42)\n", "// {n}\n"),
    "typescript": ("const x: number = 42;\nconsole.log(x)\n", "// {n}\n"),
    "ruby": ("puts 42\n", "# {n}\n"),
    "php": ("echo 42, PHP_EOL;\n", "// {n}\n"),
    "lua": ("print(42)\n", "-- {n}\n"),
    "r": ("cat(42, '\\n')\n", "# {n}\n"),
    "racket": ("#lang racket\n(displayln 42)\n", "; {n}\n"),
    "perl": ('print "42\\n";\n', "# {n}\n"),
}
LIMITS = Limits(wall_time=60, cpu_time=60)


async def timed(sb: AsyncSandbox, program: Program) -> float:
    t0 = time.perf_counter()
    result = await sb.run(program, LIMITS, compile_limits=LIMITS)
    elapsed = time.perf_counter() - t0
    if result.verdict is not Verdict.ACCEPTED or result.stdout.strip() != "42":
        raise RuntimeError(f"{program.language}: {result.verdict} {result.stderr[-500:]}")
    return elapsed * 1000


async def bench(repeats: int) -> list[tuple[str, float | None, float]]:
    rows = []
    async with AsyncSandbox(pool_size=2) as sb:
        for name, (source, comment) in HELLO.items():
            try:
                resolve_toolchain(LANGUAGES[name])
            except LanguageUnavailable:
                continue
            compiled = LANGUAGES[name].compiled
            fresh: list[float] = []
            cached: list[float] = []
            await timed(sb, Program(language=name, source=source))  # warm the toolchain's files
            for i in range(repeats):
                if compiled:
                    fresh.append(await timed(sb, Program(language=name, source=source + comment.format(n=i))))
                cached.append(await timed(sb, Program(language=name, source=source)))
            rows.append((name, statistics.median(fresh) if fresh else None, statistics.median(cached)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = asyncio.run(bench(max(1, args.repeats)))
    print("| language | compile + run, ms (p50) | run with a cached build, ms (p50) | ratio |")
    print("|---|---|---|---|")
    for name, fresh, cached in rows:
        if fresh is None:
            print(f"| {name} | (interpreted) | {cached:.0f} | |")
        else:
            print(f"| {name} | {fresh:.0f} | {cached:.0f} | {fresh / cached:.0f}x |")


if __name__ == "__main__":
    main()

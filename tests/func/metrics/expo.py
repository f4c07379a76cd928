#!/usr/bin/env python3
"""A strict reader of the Prometheus text exposition format 0.0.4, as the
functional tests need it: every line a comment (# HELP / # TYPE), a sample
or empty; names and label names by the grammar; label values with only the
three escapes; each family's HELP/TYPE before its samples and its samples
contiguous; counters >= 0; histograms with cumulative buckets ending in
+Inf equal to _count.  Prints a JSON object {"name{sorted labels}": value}
to stdout, or an error naming the line and exits 1.  (promtool is the real
parser the tests also run; this one is for the numbers.)"""
import json
import math
import re
import sys

NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LNAME = r'[a-zA-Z_][a-zA-Z0-9_]*'
SAMPLE = re.compile(r'^(' + NAME + r')(\{.*\})? (\S+)$')


def fail(n, line, why):
    sys.exit(f"line {n}: {why}: {line!r}")


def labels(n, line, s):
    out, i = {}, 1
    if s == '{}':
        return out
    while True:
        m = re.compile(LNAME + '=').match(s, i)
        if not m:
            fail(n, line, 'bad label name')
        key = m.group(0)[:-1]
        i = m.end()
        if s[i] != '"':
            fail(n, line, 'label value not quoted')
        i += 1
        val = ''
        while s[i] != '"':
            if s[i] == '\\':
                esc = s[i + 1]
                if esc not in 'n"\\':
                    fail(n, line, 'bad escape')
                val += '\n' if esc == 'n' else esc
                i += 2
            elif s[i] == '\n':
                fail(n, line, 'raw newline')
            else:
                val += s[i]
                i += 1
        i += 1
        if key in out:
            fail(n, line, 'duplicate label')
        out[key] = val
        if s[i] == '}':
            if i != len(s) - 1:
                fail(n, line, 'junk after labels')
            return out
        if s[i] != ',':
            fail(n, line, 'expected , between labels')
        i += 1


def main():
    text = sys.stdin.read()
    if not text.endswith('\n'):
        sys.exit('no final newline')
    types, helps, done, cur = {}, set(), set(), None
    values, hist = {}, {}
    for n, line in enumerate(text.split('\n')[:-1], 1):
        if line == '':
            continue
        if line.startswith('#'):
            m = re.match(r'^# (HELP|TYPE) (' + NAME + r') (.*)$', line)
            if not m:
                if line.startswith('# HELP') or line.startswith('# TYPE'):
                    fail(n, line, 'bad HELP/TYPE')
                continue
            kind, name, rest = m.groups()
            if name in done and name != cur:
                fail(n, line, 'family reopened')
            if kind == 'TYPE':
                if rest not in ('counter', 'gauge', 'histogram', 'summary', 'untyped'):
                    fail(n, line, 'bad type')
                if name in types:
                    fail(n, line, 'second TYPE')
                types[name] = rest
            else:
                if name in helps:
                    fail(n, line, 'second HELP')
                helps.add(name)
            if cur != name:
                if cur:
                    done.add(cur)
                cur = name
            continue
        m = SAMPLE.match(line)
        if not m:
            fail(n, line, 'not a sample')
        name, lab, val = m.groups()
        lab = labels(n, line, lab) if lab else {}
        fam = name
        for suf in ('_bucket', '_sum', '_count'):
            if name.endswith(suf) and types.get(name[:-len(suf)]) == 'histogram':
                fam = name[:-len(suf)]
        if fam != cur:
            fail(n, line, f'sample outside its family (current {cur})')
        if fam not in types:
            fail(n, line, 'sample before TYPE')
        try:
            v = float(val)
        except ValueError:
            fail(n, line, 'bad value')
        if types[fam] == 'counter' and (v < 0 or math.isnan(v)):
            fail(n, line, 'negative counter')
        if types[fam] == 'histogram' and name.endswith('_bucket'):
            if 'le' not in lab:
                fail(n, line, 'bucket without le')
            le = float(lab.pop('le'))
            key = (fam, json.dumps(lab, sort_keys=True))
            prev = hist.setdefault(key, [])
            if prev and (le <= prev[-1][0] or v < prev[-1][1]):
                fail(n, line, 'buckets not increasing')
            prev.append((le, v))
            continue
        key = name + json.dumps(lab, sort_keys=True)
        if key in values:
            fail(n, line, 'duplicate sample')
        values[key] = v
    for (fam, lab), b in hist.items():
        if b[-1][0] != math.inf:
            sys.exit(f'{fam}{lab}: no +Inf bucket')
        if values.get(fam + '_count' + lab) != b[-1][1]:
            sys.exit(f'{fam}{lab}: +Inf bucket != _count')
        for le, v in b:
            values[f'{fam}_bucket{lab}@{le}'] = v
    json.dump(values, sys.stdout, sort_keys=True)


main()

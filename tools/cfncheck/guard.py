"""Run AWS Control Tower's cfn-guard rules over the SAM-transformed template.

    python tools/cfncheck/guard.py GUARD_BIN RULES_DIR TEMPLATE_YAML TRANSFORMED_JSON SERVICE...

Fn::If is resolved with the parameters' defaults first (cfn-guard cannot
evaluate conditions). Each rule file of the named services (folders of RULES_DIR) runs on its own;
a finding is a (control, resource) pair. A control judged not applicable is
named in template.yaml by a comment line

    # cfn-guard n/a CT.S3.PR.10: <reason>                (every resource)
    # cfn-guard n/a CT.S3.PR.10 A,B: <reason>            (those resources)

and is reported as such, not as a finding. Exit status 1 when a finding
remains, or when an n/a line names a control that no rule file has.
"""
import glob
import json
import os
import re
import subprocess
import sys

NA = re.compile(r"^\s*#\s*cfn-guard n/a (CT\.[A-Z0-9.]+\.\d+)(?: ([A-Za-z0-9,]+))?:\s*(.+)$")
CT = re.compile(r"\[(CT\.[A-Z0-9]+\.PR\.\d+)\]")
RES = re.compile(r"^/Resources/([^/]+)")


def not_applicable(template):
    out = {}
    with open(template) as f:
        for line in f:
            m = NA.match(line)
            if m:
                ids = set(m.group(2).split(",")) if m.group(2) else None
                out[m.group(1)] = (ids, m.group(3).strip())
    return out


def walk(node, controls, resources):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "custom_message" and isinstance(v, str):
                controls.update(CT.findall(v))
            elif k == "path" and isinstance(v, str):
                m = RES.match(v)
                if m:
                    resources.add(m.group(1))
            else:
                walk(v, controls, resources)
    elif isinstance(node, list):
        for v in node:
            walk(v, controls, resources)


def condition(tpl, c, memo):
    """Evaluates a condition with the parameters' defaults."""
    if isinstance(c, str):
        if c not in memo:
            memo[c] = condition(tpl, tpl.get("Conditions", {})[c], memo)
        return memo[c]
    (fn, args), = c.items()
    if fn == "Fn::Not":
        return not condition(tpl, args[0], memo)
    if fn == "Fn::And":
        return all(condition(tpl, a, memo) for a in args)
    if fn == "Fn::Or":
        return any(condition(tpl, a, memo) for a in args)
    if fn == "Condition":
        return condition(tpl, args, memo)
    if fn == "Fn::Equals":
        return value(tpl, args[0]) == value(tpl, args[1])
    sys.exit(f"condition: {fn} not understood")


def value(tpl, v):
    if isinstance(v, dict) and set(v) == {"Ref"}:
        return str(tpl.get("Parameters", {})[v["Ref"]].get("Default", ""))
    return str(v)


NOVALUE = object()


def resolve_ifs(tpl, node, memo):
    """Replaces each Fn::If by its branch under the parameters' defaults (the
    stack `sam deploy` creates without overrides), as CloudFormation would."""
    if isinstance(node, dict):
        if set(node) == {"Fn::If"}:
            c, a, b = node["Fn::If"]
            return resolve_ifs(tpl, a if condition(tpl, c, memo) else b, memo)
        if node == {"Ref": "AWS::NoValue"}:
            return NOVALUE
        out = {}
        for k, v in node.items():
            v = resolve_ifs(tpl, v, memo)
            if v is not NOVALUE:
                out[k] = v
        return out
    if isinstance(node, list):
        return [x for x in (resolve_ifs(tpl, v, memo) for v in node) if x is not NOVALUE]
    return node


def run(guard, rules, data):
    """Every rule file in one cfn-guard run (a run per file cost 0.1 s of
    CPU each, 6 s for the 60); a finding names its Control Tower control
    in its message, else the rule that failed."""
    args = [guard, "validate"]
    for rule in rules:
        args += ["-r", rule]
    p = subprocess.run(args + ["-d", data, "--show-summary", "none", "-o", "json", "--structured"],
                       capture_output=True, text=True)
    if p.returncode not in (0, 19):  # 19: validation failed
        sys.exit(f"{guard} on {len(rules)} rule files: exit {p.returncode}\n{p.stderr}")
    findings = []
    for doc in json.loads(p.stdout or "[]"):
        for entry in doc.get("not_compliant", []):
            controls, resources = set(), set()
            walk(entry, controls, resources)
            rule = (entry.get("Rule") or {}).get("name", "(rule)")
            for c in controls or {rule}:
                for r in resources or {"(template)"}:
                    findings.append((c, r))
    return findings


def main():
    guard, rules, template, data, *services = sys.argv[1:]
    na = not_applicable(template)
    with open(data) as f:
        tpl = json.load(f)
    resolved = data + ".defaults.json"
    with open(resolved, "w") as f:
        json.dump(resolve_ifs(tpl, tpl, {}), f, indent=1)
    data = resolved
    seen, findings, skipped, files = set(), [], [], []
    for svc in services:
        found = sorted(glob.glob(os.path.join(rules, svc, "*.guard")))
        if not found:
            sys.exit(f"no rules for {svc} under {rules}")
        files += found
    for rule in files:
        with open(rule) as f:
            seen.update(CT.findall(f.read()))
    count = len(files)
    for c, r in sorted(set(run(guard, files, data))):
        ids, reason = na.get(c, (set(), ""))
        if ids is None or r in ids:
            skipped.append((c, r, reason))
        else:
            findings.append((c, r))
    by = {}
    for c, r, reason in skipped:
        by.setdefault((c, reason), []).append(r)
    for (c, reason), rs in sorted(by.items()):
        print(f"n/a   {c} ({', '.join(sorted(set(rs)))}): {reason}")
    for c, r in findings:
        print(f"FAIL  {c} {r}")
    unknown = sorted(set(na) - seen)
    for c in unknown:
        print(f"template.yaml names {c} as not applicable, but no rule file of {services} has it")
    print(f"cfn-guard: {count} Control Tower rule files ({', '.join(services)}): "
          f"{len(findings)} findings, {len(skipped)} not applicable")
    sys.exit(1 if findings or unknown else 0)


if __name__ == "__main__":
    main()

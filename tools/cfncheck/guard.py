"""Run AWS Control Tower's cfn-guard rules over the SAM-transformed template.

    python tools/cfncheck/guard.py GUARD_BIN RULES_DIR TEMPLATE_YAML TRANSFORMED_JSON SERVICE...

Each rule file of the named services (folders of RULES_DIR) runs on its own;
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


def run(guard, rule, data):
    p = subprocess.run(
        [guard, "validate", "-r", rule, "-d", data, "--show-summary", "none", "-o", "json", "--structured"],
        capture_output=True, text=True)
    if p.returncode not in (0, 19):  # 19: validation failed
        sys.exit(f"{guard} on {rule}: exit {p.returncode}\n{p.stderr}")
    findings = []
    for doc in json.loads(p.stdout or "[]"):
        for entry in doc.get("not_compliant", []):
            controls, resources = set(), set()
            walk(entry, controls, resources)
            for c in controls or {os.path.basename(rule)}:
                for r in resources or {"(template)"}:
                    findings.append((c, r))
    return findings


def main():
    guard, rules, template, data, *services = sys.argv[1:]
    na = not_applicable(template)
    seen, findings, skipped, count = set(), [], [], 0
    for svc in services:
        files = sorted(glob.glob(os.path.join(rules, svc, "*.guard")))
        if not files:
            sys.exit(f"no rules for {svc} under {rules}")
        for rule in files:
            count += 1
            with open(rule) as f:
                seen.update(CT.findall(f.read()))
            for c, r in sorted(set(run(guard, rule, data))):
                ids, reason = na.get(c, (set(), ""))
                if ids is None or r in ids:
                    skipped.append((c, r, reason))
                else:
                    findings.append((c, r))
    for c, r, reason in skipped:
        print(f"n/a   {c} {r}: {reason}")
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

# METADATA
# title: Configuration check
# description: >-
#   The errors of data.regosched.config: the JSON schema its keys and values
#   must follow, then the references between its parts that a schema cannot
#   state. regosched refuses a bundle whose errors are not empty, as it
#   refuses one that does not compile, and keeps the policy it has; authors
#   see the same errors with `opa eval -b rego/ data.regosched.validate.errors`
#   and through the test of the shipped data in validate_test.rego.
package regosched.validate

import data.regosched.config

# METADATA
# entrypoint: true
errors contains msg if {
	[ok, schema_errors] := json.match_schema(config, schema)
	not ok
	some e in schema_errors
	msg := sprintf("data.regosched.config: %s: %s", [e.field, e.desc])
}

errors contains sprintf("data.regosched.config.workloads.%s.%s[%d]: %s %q is not a role of the workload (roles: %s)", [name, kind, i, field, role, roles_list(entry)]) if {
	some name, entry in object.get(config, "workloads", {})
	some kind in rule_kinds
	some i, rule in object.get(entry, kind, [])
	some field in ["role", "peer_role"]
	role := rule[field]
	not is_role(entry, role)
}

errors contains sprintf("data.regosched.config.workloads.%s.quorum[%d]: role %q is not a role of the workload (roles: %s)", [name, i, rule.role, roles_list(entry)]) if {
	some name, entry in object.get(config, "workloads", {})
	some i, rule in object.get(entry, "quorum", [])
	not is_role(entry, rule.role)
}

errors contains sprintf("data.regosched.config.workloads.%s.protected_roles[%d]: %q is not a role of the workload (roles: %s)", [name, i, role, roles_list(entry)]) if {
	some name, entry in object.get(config, "workloads", {})
	some i, role in object.get(entry, "protected_roles", [])
	not is_role(entry, role)
}

errors contains sprintf("data.regosched.config.workloads.%s.live_roles: the workload must define role %q, which live roles write", [name, role]) if {
	some name, entry in object.get(config, "workloads", {})
	entry.live_roles
	some role in ["master", "replica"]
	not object.get(entry, "roles", {})[role]
}

errors contains sprintf("data.regosched.config.workloads.%s.unknown_role: %q is also a role with labels; an unknown role must be a name of its own", [name, entry.unknown_role]) if {
	some name, entry in object.get(config, "workloads", {})
	object.get(entry, "roles", {})[entry.unknown_role]
}

rule_kinds := ["separate", "zone_separate", "node_spread", "zone_apart"]

is_role(_, "*")

is_role(entry, role) if object.get(entry, "roles", {})[role]

is_role(entry, role) if entry.unknown_role == role

roles_list(entry) := concat(", ", sort(array.concat(["*"], [r | some r, _ in object.get(entry, "roles", {})])))

label_set := {"type": "object", "additionalProperties": {"type": "string"}}

role_name := {"type": "string", "pattern": "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"}

rule_properties := {
	"name": {"type": "string", "minLength": 1},
	"role": {"type": "string", "minLength": 1},
	"peer_role": {"type": "string", "minLength": 1},
	"scope": {"enum": ["cluster", "shard"]},
}

hard_rules := {"type": "array", "items": {
	"type": "object",
	"additionalProperties": false,
	"required": ["name", "role", "peer_role", "scope"],
	"properties": rule_properties,
}}

soft_rules := {"type": "array", "items": {
	"type": "object",
	"additionalProperties": false,
	"required": ["name", "role", "peer_role", "scope"],
	"properties": object.union(rule_properties, {"weight": {"type": "number", "minimum": 0}}),
}}

# How a workload's zone rules apply: zone_separate as hard rules per zone,
# as soft ones (penalties, weight zone_apart), or not at all (zone_apart
# off too).
zones_mode := {"enum": ["hard", "soft", "off"]}

quorum_rules := {"type": "array", "items": {
	"type": "object",
	"additionalProperties": false,
	"required": ["name", "role", "scope"],
	"properties": {
		"name": {"type": "string", "minLength": 1},
		"role": {"type": "string", "minLength": 1},
		"scope": {"enum": ["cluster", "shard"]},
		"size": {"type": "integer", "minimum": 1},
		"size_from_statefulsets": {"type": "boolean"},
	},
}}

workload := {
	"type": "object",
	"additionalProperties": false,
	"required": ["cluster_label"],
	"properties": {
		"kind": {"type": "string", "minLength": 1},
		"match_labels": label_set,
		"match_exists": {"type": "array", "items": {"type": "string", "minLength": 1}},
		"cluster_label": {"type": "string", "minLength": 1},
		"shard_label": {"type": "string", "minLength": 1},
		"roles": {"type": "object", "propertyNames": role_name, "additionalProperties": {
			"type": "array", "minItems": 1, "items": label_set,
		}},
		"unknown_role": role_name,
		"live_roles": {
			"type": "object",
			"additionalProperties": false,
			"required": ["source"],
			"properties": {
				"source": {"enum": ["redis"]},
				"port_names": {"type": "array", "items": {"type": "string", "minLength": 1}},
				"port": {"type": "integer", "minimum": 1, "maximum": 65535},
			},
		},
		"protected_roles": {"type": "array", "items": {"type": "string"}},
		"separate": hard_rules,
		"zone_separate": soft_rules,
		"quorum": quorum_rules,
		"zones": zones_mode,
		"node_spread": soft_rules,
		"zone_apart": soft_rules,
	},
}

schema := {
	"type": "object",
	"additionalProperties": false,
	"required": ["hostname_key", "zone_label", "workloads"],
	"properties": {
		"hostname_key": {"type": "string", "minLength": 1},
		"zone_label": {"type": "string", "minLength": 1},
		"zones": zones_mode,
		"weights": {
			"type": "object",
			"additionalProperties": false,
			"properties": {
				"node_spread": {"type": "number", "minimum": 0},
				"zone_apart": {"type": "number", "minimum": 0},
			},
		},
		"live_labels": {
			"type": "object",
			"additionalProperties": false,
			"required": ["role", "shard"],
			"properties": {
				"role": {"type": "string", "minLength": 1},
				"shard": {"type": "string", "minLength": 1},
			},
		},
		"workloads": {"type": "object", "additionalProperties": workload},
	},
}

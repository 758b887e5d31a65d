"""Which of the SDK's `AdvancedSQLiteSession` tests run against ours, and why the others do not.

Kept: every test that uses the class's public API (its constructor, methods, `close()`, the
`_current_branch_id` attribute the SDK documents, the Runner). Excluded: tests that read or
alter the SDK's own SQLite tables and connections, replace its private methods, or pause its
private worker functions by name; each with its reason. `test_sdk_advanced_session.py`
checks that every test of the SDK file is in exactly one of the two lists.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from .harness import Suite

TEST_FILE = PurePosixPath("tests/extensions/memory/test_advanced_sqlite_session.py")

KEPT: tuple[str, ...] = (
    "test_advanced_session_basic_functionality",
    "test_advanced_sqlite_session_closed_rejects_empty_add_items",
    "test_message_structure_tracking",
    "test_tool_usage_tracking",
    "test_tool_usage_tracks_shell_and_patch_calls",
    "test_tool_usage_tracks_runner_shell_and_patch_calls_by_branch",
    "test_tool_usage_tracking_preserves_namespaces_and_tool_search",
    "test_tool_usage_tracking_counts_tool_search_output_without_matching_call",
    "test_tool_usage_tracking_uses_bare_name_for_deferred_top_level_calls",
    "test_tool_usage_tracking_collapses_reserved_same_name_namespace_shape",
    "test_branching_functionality",
    "test_create_branch_rejects_blank_name",
    "test_create_branch_rejects_populated_branch_id",
    "test_generated_branch_ids_do_not_merge_within_the_same_second",
    "test_branch_ids_remain_reserved_after_delete_and_clear",
    "test_get_conversation_turns",
    "test_find_turns_by_content",
    "test_find_turns_by_content_matches_literal_text",
    "test_create_branch_from_content_uses_decoded_match",
    "test_find_turns_by_content_with_escaped_text_parts",
    "test_find_turns_by_content_filters_session_and_branch",
    "test_get_conversation_turns_with_list_content",
    "test_find_turns_by_content_with_list_content",
    "test_create_branch_from_content",
    "test_branch_specific_operations",
    "test_branch_error_handling",
    "test_delete_branch_preserves_exact_branch_id",
    "test_branch_deletion_with_force",
    "test_failed_force_delete_keeps_current_branch",
    "test_get_items_with_parameters",
    "test_usage_tracking_storage",
    "test_runner_integration_with_usage_tracking",
    "test_sequence_ordering",
    "test_conversation_structure_with_multiple_turns",
    "test_empty_session_operations",
    "test_json_serialization_edge_cases",
    "test_session_isolation",
    "test_error_handling_in_usage_tracking",
    "test_advanced_tool_name_extraction",
    "test_branch_usage_tracking",
    "test_tool_name_extraction",
    "test_tool_execution_integration",
    "test_session_settings_default",
    "test_session_settings_constructor",
    "test_get_items_uses_session_settings_limit",
    "test_get_items_explicit_limit_overrides_session_settings",
    "test_get_items_limit_returns_fewer_when_history_exhausted",
    "test_session_settings_resolve",
    "test_runner_with_session_settings_override",
    "test_output_tokens_details_persisted_when_input_details_missing",
    "test_pop_item_claim_is_unique_across_processes",
    "test_store_run_usage_after_reopening_cleared_session",
    "test_external_clear_resets_stale_branch_before_next_write",
    "test_external_clear_resets_stale_branch_before_pop",
    "test_external_clear_resets_stale_branch_before_default_reads",
    "test_post_clear_switch_synchronizes_generation_before_next_write",
)

_OWN_TABLES = "reads the SDK's own tables ({}) through its private connection"
_GATED = "pauses the SDK's private worker function {} by name (patched asyncio.to_thread)"
_LAYOUT = "checks ownership of the SDK's SQLite structure tables (PRAGMA foreign_key_list)"

EXCLUDED: dict[str, str] = {
    "test_tool": "not a test: a @function_tool the tests give their agent",
    "test_create_branch_logging_respects_model_data_policy": (
        "expects a turn's text in debug logs unless the SDK's private _debug flag is set; "
        "this library never logs conversation content"
    ),
    "test_advanced_session_respects_custom_table_names": _OWN_TABLES.format(
        "PRAGMA foreign_key_list of message_structure, turn_usage"
    ),
    "test_add_items_rolls_back_messages_when_structure_metadata_fails": (
        "overrides the SDK's private _insert_structure_metadata"
    ),
    "test_add_items_can_retry_after_structure_metadata_failure": (
        "overrides the SDK's private _insert_structure_metadata"
    ),
    "test_add_items_failure_preserves_existing_history": (
        "overrides the SDK's private _insert_structure_metadata"
    ),
    "test_add_items_rolls_back_partial_structure_metadata_write": (
        "overrides the SDK's private _insert_structure_metadata"
    ),
    "test_add_items_rollback_failure_invalidates_connection": (
        "replaces the SDK's sqlite3 connections (_connections, _get_connection)"
    ),
    "test_structure_initialization_failure_invalidates_connection": (
        "drops the SDK's branch_reservations table and tracks its sqlite3 connections"
    ),
    "test_post_commit_cancellation_propagates_after_known_mutation_outcome": (
        "replaces the SDK's sqlite3 connections (_connections)"
    ),
    "test_auxiliary_mutation_cancellation_waits_for_commit": (
        "replaces the SDK's sqlite3 connections and private _write_connection"
    ),
    "test_tool_usage_reads_legacy_shell_and_patch_names": (
        "rewrites the SDK's message_structure rows with sqlite3"
    ),
    "test_failed_branch_reservation_rolls_back_and_allows_retry": (
        "overrides the SDK's private _reserve_branch_id and reads branch_reservations"
    ),
    "test_branch_reservations_migrate_existing_populated_branches": (
        "drops the SDK's branch_reservations table (its legacy-layout migration)"
    ),
    "test_legacy_branch_ids_are_backfilled_before_destructive_operations": (
        "drops the SDK's branch_reservations table (its legacy-layout migration)"
    ),
    "test_legacy_destructive_noops_leave_database_unlocked": (
        "drops the SDK's legacy tables and inspects its sqlite3 connections"
    ),
    "test_branch_allocation_is_serialized_across_processes": (
        "child processes override the SDK's private _locked_connection/_reserve_branch_id "
        "(tests/test_branches.py races branch creation across processes instead)"
    ),
    "test_delete_branch_removes_branch_only_messages": _OWN_TABLES.format("agent_messages"),
    "test_delete_branch_keeps_messages_still_referenced_by_another_branch": _OWN_TABLES.format(
        "agent_messages"
    ),
    "test_orphan_cleanup_uses_set_based_delete_for_many_messages": (
        "calls the SDK's private _cleanup_orphaned_messages_sync with a fake cursor"
    ),
    "test_failed_usage_write_rolls_back_cached_connection": (
        "adds a trigger to the SDK's turn_usage table through _get_connection"
    ),
    "test_usage_tracking_failure_identity_follows_model_data_policy": (
        "patches the SDK's private _update_turn_usage_internal"
    ),
    "test_get_items_limit_skips_corrupt_newest_rows": (
        "injects a corrupt row into the SDK's tables (this library raises CorruptItemError "
        "for such a row instead of skipping it)"
    ),
    "test_concurrent_add_items_preserves_message_structure_for_file_db": _OWN_TABLES.format(
        "message_structure"
    ),
    "test_clear_session_removes_structure_and_usage_metadata": _OWN_TABLES.format(
        "message_structure, turn_usage"
    ),
    "test_pop_item_removes_its_structure_row": _OWN_TABLES.format("message_structure"),
    "test_pop_item_removes_turn_usage_only_when_turn_emptied": _OWN_TABLES.format("turn_usage"),
    "test_pop_item_respects_current_branch_and_keeps_shared_messages": _OWN_TABLES.format(
        "message_structure"
    ),
    "test_pop_item_deletes_shared_copied_message_only_when_unreferenced": _OWN_TABLES.format(
        "agent_messages, message_structure"
    ),
    "test_pop_item_uses_branch_snapshot_when_branch_switches_concurrently": _GATED.format(
        "_pop_item_sync"
    ),
    "test_stale_switch_after_clear_does_not_repoint_to_deleted_branch": _GATED.format(
        "_commit_branch_pointer"
    ),
    "test_stale_create_branch_after_clear_does_not_repoint": _GATED.format(
        "_commit_branch_pointer"
    ),
    "test_clear_before_branch_transaction_prevents_stale_reservation": _GATED.format("_copy_sync"),
    "test_store_run_usage_waits_for_database_lock_off_event_loop": (
        "replaces the SDK's private _lock"
    ),
    "test_store_run_usage_cancellation_during_capture_waits_for_commit": _GATED.format(
        "_capture_current_turn"
    ),
    "test_store_run_usage_keeps_target_while_capture_is_waiting": _GATED.format(
        "_capture_current_turn"
    ),
    "test_store_run_usage_keeps_turn_when_history_changes_during_capture": _GATED.format(
        "_capture_current_turn"
    ),
    "test_add_captures_coherent_branch_after_clear_publication": (
        "intercepts assignments to the SDK's private _branch_state/_generation"
    ),
    "test_queued_add_keeps_selected_branch": _GATED.format("_capture_current_turn"),
    "test_queued_append_cannot_resurrect_deleted_branch": (
        "patches the SDK's private _run_ordered_turn_operation"
    ),
    "test_queued_turn_mutation_releases_later_usage_capture": _GATED.format("_pop_item_sync"),
    "test_turn_ordering_survives_reuse_on_another_event_loop": _GATED.format(
        "_capture_current_turn"
    ),
    "test_stale_store_run_usage_skipped_when_turn_removed_by_pop": _GATED.format("_update_sync"),
    "test_stale_store_run_usage_not_recorded_against_reused_turn_number": _GATED.format(
        "_update_sync"
    ),
    "test_store_run_usage_survives_unrelated_branch_deletion": _GATED.format("_update_sync"),
    "test_store_run_usage_skips_when_current_branch_has_no_turn": _OWN_TABLES.format("turn_usage"),
    "test_clear_session_resets_current_branch_to_main": _OWN_TABLES.format("branch_reservations"),
    "test_default_read_does_not_initialize_clear_generation_table": (
        "drops the SDK's session_clear_generations table"
    ),
    "test_switch_validation_cancellation_waits_for_generation_commit": (
        "replaces the SDK's sqlite3 connections and private _write_connection"
    ),
    "test_pop_item_rolls_back_on_failure_after_earlier_delete": (
        "patches the SDK's private _locked_connection"
    ),
    "test_clear_session_rolls_back_on_failure_after_earlier_delete": (
        "replaces the SDK's private _shared_connection"
    ),
    "test_structure_tables_reject_a_second_base_table_pair": _LAYOUT,
    "test_structure_tables_reject_changed_sessions_with_shared_messages": _LAYOUT,
    "test_structure_tables_reject_changed_messages_with_shared_sessions": _LAYOUT,
    "test_structure_tables_accept_equivalent_identifier_casing": _LAYOUT,
    "test_structure_tables_accept_quoted_custom_session_table": _LAYOUT,
    "test_identifier_resolution_leaves_connection_authorized": (
        "calls the SDK's private _resolve_table_identifier"
    ),
    "test_structure_tables_reject_distinct_non_ascii_identifiers": _LAYOUT,
    "test_no_create_session_rejects_a_database_without_an_owner": _LAYOUT,
    "test_no_create_session_rejects_owner_metadata_without_base_tables": _LAYOUT,
    "test_structure_tables_reject_an_ownerless_layout": _LAYOUT,
    "test_structure_tables_reject_malformed_owner_layouts": _LAYOUT,
    "test_structure_tables_accept_equivalent_child_column_casing": _LAYOUT,
    "test_concurrent_structure_table_claims_leave_one_coherent_owner": _LAYOUT,
}

# The SDK's class stores token details as `vars(details)`: with this openai release that
# includes `cache_write_tokens_details: None`, which the test's expected dict lacks.
SDK_FAILURES: dict[str, str] = {
    "test_external_clear_resets_stale_branch_before_default_reads[usage]": (
        "the SDK's class keeps cache_write_tokens_details=None in the input token details"
    ),
}

ADVANCED = Suite(
    TEST_FILE,
    "agents.extensions.memory",
    "AdvancedSQLiteSession",
    KEPT,
    EXCLUDED,
    by_function=True,
    sdk_failures=SDK_FAILURES,
)

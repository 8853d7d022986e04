/*
 * Moves home (docs/map.md, "Aging, and moving home"): when a transaction begins and reclaims an old
 * version, the version that replaced it moves back into the slot it left, if its probe passes
 * there. Checked here: the table keeps its first-day layout under steady replacement (without the
 * moves, entries end up about three times further from home); a move is a version like any other,
 * which old snapshots do not see and abort undoes; the slot a move leaves is reclaimed in turn;
 * moves wait while the ring of old versions is half full; variable-size entries get a block of
 * their own, and stay when there is none; successors that are stale (replaced again, made by this
 * transaction, deleted at once), out of range, or nearer home than the old version move nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map_test.h"

/* The sum of every current entry's distance from its home slot. */
static uint64_t distance_from_home(const sxe_map_t *map)
{
    uint64_t sum = 0;

    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (sxe__map_is_entry(slot->tag) && slot->deleted == 0) {
            uint64_t home = sxe__map_home(map, slot->tag);
            sum += (index + map->slot_count - home) % map->slot_count;
        }
    }
    return sum;
}

/*
 * 2,000 keys at the default load, then 60 transactions each replacing a random 5% of them: the
 * entries' distance from home stays near the fresh table's, and every key keeps its last value.
 */
static void test_replaced_keys_stay_near_home(void **state)
{
    struct sxe_map_options options = fixed_options(2000);
    uint64_t last[2000];
    unsigned seed = 7;

    (void)state;
    sxe_map_t *map = make_map(options);
    begin(map);
    for (uint64_t key = 0; key < 2000; key++) {
        assert_int_equal(put(map, key, key), 0);
        last[key] = key;
    }
    commit(map);
    uint64_t fresh = distance_from_home(map);
    for (unsigned round = 1; round <= 60; round++) {
        begin(map);
        for (unsigned i = 0; i < 100; i++) {
            uint64_t key = (uint64_t)rand_r(&seed) % 2000;
            assert_true(put(map, key, round * 10000 + key) >= 0);
            last[key] = round * 10000 + key;
        }
        commit(map);
    }
    begin(map); /* reclaims the last round and moves its keys home */
    commit(map);
    begin(map); /* reclaims the slots the moves left */
    commit(map);
    struct sxe_map_stats stats = stats_of(map);
    assert_true(stats.moved_home > 3000);
    assert_int_equal(stats.pending, 0);
    assert_true(distance_from_home(map) <= fresh + fresh / 4);
    for (uint64_t key = 0; key < 2000; key++) {
        assert_int_equal(read_now(map, key), last[key]);
    }
    sxe_map_destroy(map);
}

/*
 * A move is a version of the transaction that begins: snapshots taken before its commit read the
 * old slot (and a pointer into it stays good), later ones the new; the slot it leaves is reclaimed
 * by the next begin, which moves nothing more.
 */
static void test_a_move_is_a_version(void **state)
{
    struct sxe_map_reader before, after;

    (void)state;
    sxe_map_t *map = make_map(fixed_options(16));
    begin(map);
    assert_int_equal(put(map, 5, 1), 0);
    commit(map);
    uint64_t first = slot_of(map, 5);
    begin(map);
    assert_int_equal(put(map, 5, 2), 1);
    commit(map);
    uint64_t second = slot_of(map, 5);
    assert_int_not_equal(second, first); /* no tombstone before it: past its old slot */

    assert_int_equal(sxe_map_read_begin(map, &before), 0);
    const struct value *held = sxe_map_find(&before, &(uint64_t){5}, sizeof(uint64_t), NULL);
    assert_ptr_equal(held, (const char *)(sxe__map_slot(map, second) + 1) + sizeof(uint64_t));
    sxe_map_read_end(&before);
    begin(map);
    assert_int_equal(stats_of(map).moved_home, 1);
    assert_int_equal(slot_of(map, 5), first);
    assert_int_equal(sxe__map_slot(map, first)->created, 3);
    assert_int_equal(sxe__map_slot(map, second)->deleted, 3);
    assert_int_equal(sxe_map_read_begin(map, &before), 0); /* at version 2: not moved yet */
    assert_int_equal(read_number(&before, 5), 2);
    held = sxe_map_find(&before, &(uint64_t){5}, sizeof(uint64_t), NULL);
    assert_ptr_equal(held, (const char *)(sxe__map_slot(map, second) + 1) + sizeof(uint64_t));
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &after), 0);
    held = sxe_map_find(&after, &(uint64_t){5}, sizeof(uint64_t), NULL);
    assert_ptr_equal(held, (const char *)(sxe__map_slot(map, first) + 1) + sizeof(uint64_t));
    assert_int_equal(read_number(&after, 5), 2);
    sxe_map_read_end(&after);

    /* The old snapshot holds the slot the move left. */
    begin(map);
    assert_int_equal(stats_of(map).pending, 1);
    assert_int_equal(stats_of(map).held_back, 1);
    commit(map);
    assert_int_equal(read_number(&before, 5), 2);
    sxe_map_read_end(&before);
    begin(map);
    struct sxe_map_stats stats = stats_of(map);
    assert_int_equal(stats.pending, 0);
    assert_int_equal(stats.moved_home, 1);
    commit(map);
    assert_int_equal(read_now(map, 5), 2);
    sxe_map_destroy(map);
}

/* Abort undoes the moves its begin made, as it undoes puts. */
static void test_abort_undoes_a_move(void **state)
{
    (void)state;
    sxe_map_t *map = make_map(fixed_options(16));
    begin(map);
    assert_int_equal(put(map, 9, 1), 0);
    commit(map);
    uint64_t first = slot_of(map, 9);
    begin(map);
    assert_int_equal(put(map, 9, 2), 1);
    commit(map);
    uint64_t second = slot_of(map, 9);
    begin(map);
    assert_int_equal(slot_of(map, 9), first);
    sxe_map_abort(map);
    assert_int_equal(sxe__map_validate(map), 0);
    assert_int_equal(slot_of(map, 9), second);
    assert_int_equal(sxe__map_slot(map, first)->tag, SXE__MAP_TOMBSTONE);
    assert_int_equal(stats_of(map).pending, 0);
    assert_int_equal(read_now(map, 9), 2);
    sxe_map_destroy(map);
}

/*
 * Moves wait while the ring is half full: with 8 old versions, when a begin reclaims 2 of them
 * and a reader holds 5 more, those 2 stay where they are; once it ends, they go home.
 */
static void test_moves_wait_while_the_ring_is_half_full(void **state)
{
    struct sxe_map_options options = fixed_options(16);
    struct sxe_map_reader first, second;

    (void)state;
    options.old_versions = 8;
    sxe_map_t *map = make_map(options);
    begin(map);
    for (uint64_t key = 0; key < 7; key++) {
        assert_int_equal(put(map, key, 0), 0);
    }
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &first), 0); /* version 1 */
    begin(map);
    assert_int_equal(put(map, 0, 1), 1);
    assert_int_equal(put(map, 1, 1), 1);
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &second), 0); /* version 2 */
    begin(map);
    for (uint64_t key = 2; key < 7; key++) {
        assert_int_equal(put(map, key, 1), 1);
    }
    commit(map);
    sxe_map_read_end(&first);
    begin(map); /* reclaims 0's and 1's old versions; 5 more wait for the second reader */
    struct sxe_map_stats stats = stats_of(map);
    assert_int_equal(stats.reclaimed, 2);
    assert_int_equal(stats.moved_home, 0);
    assert_int_equal(stats.pending, 5);
    commit(map);
    sxe_map_read_end(&second);
    begin(map);
    stats = stats_of(map);
    assert_int_equal(stats.reclaimed, 7);
    assert_true(stats.moved_home >= 2); /* the ring empties as they go: the later ones move */
    commit(map);
    for (uint64_t key = 0; key < 7; key++) {
        assert_int_equal(read_now(map, key), 1);
    }
    sxe_map_destroy(map);
}

/* Two keys with the same home slot h in an empty map, where h + 3 is still before the end. */
static void same_home(sxe_map_t *map, uint64_t *first, uint64_t *second, uint64_t *home)
{
    uint64_t homes[64];

    for (uint64_t key = 0; key < 64; key++) {
        homes[key] = sxe__map_home(map, sxe__map_hash(map, &key, sizeof(key)) | 1);
        for (uint64_t other = 0; other < key; other++) {
            if (homes[other] == homes[key] && homes[key] + 3 < map->slot_count) {
                *first = other;
                *second = key;
                *home = homes[key];
                return;
            }
        }
    }
    fail_msg("no two of 64 keys share a home");
}

/* A map of two keys that share home h: y in h, x in h + 1. */
static sxe_map_t *two_sharing_a_home(uint64_t *x, uint64_t *y, uint64_t *h)
{
    sxe_map_t *map = make_map(fixed_options(16));

    same_home(map, y, x, h);
    begin(map);
    assert_int_equal(put(map, *y, 0), 0);
    assert_int_equal(put(map, *x, 0), 0);
    commit(map);
    assert_int_equal(slot_of(map, *x), *h + 1);
    return map;
}

/*
 * A successor replaced again is an old version itself and moves nothing; the one that replaced it
 * goes home to the slot it left: key 1 at a, then b, then c; a reader held the first version.
 */
static void test_a_successor_replaced_again_stays(void **state)
{
    struct sxe_map_reader reader;

    (void)state;
    sxe_map_t *map = make_map(fixed_options(16));
    begin(map);
    assert_int_equal(put(map, 1, 0), 0);
    commit(map);
    uint64_t a = slot_of(map, 1);
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    begin(map);
    assert_int_equal(put(map, 1, 1), 1);
    commit(map);
    uint64_t b = slot_of(map, 1);
    begin(map);
    assert_int_equal(put(map, 1, 2), 1);
    commit(map);
    sxe_map_read_end(&reader);
    begin(map);
    assert_int_equal(stats_of(map).moved_home, 1);
    assert_int_equal(slot_of(map, 1), b);
    assert_int_equal(sxe__map_slot(map, a)->tag, SXE__MAP_TOMBSTONE);
    commit(map);
    assert_int_equal(read_now(map, 1), 2);
    sxe_map_destroy(map);
}

/*
 * A successor made by the transaction that begins (here, by the move just before it) moves
 * nothing: keys x and y share home h, at h + 1 and h; both are replaced (to h + 2 and h + 3), and
 * y's successor is then pointed at h + 1, where x moves back first.
 */
static void test_a_successor_made_by_this_transaction_stays(void **state)
{
    uint64_t x, y, h;

    (void)state;
    sxe_map_t *map = two_sharing_a_home(&x, &y, &h);
    begin(map);
    assert_int_equal(put(map, x, 1), 1);
    assert_int_equal(put(map, y, 1), 1);
    commit(map);
    assert_int_equal(slot_of(map, x), h + 2);
    assert_int_equal(slot_of(map, y), h + 3);
    uint64_t position = map->header->ring_tail - 1; /* y's old version, at h */
    assert_int_equal(map->ring[position % map->old_versions], h);
    map->successors[position % map->old_versions] = (uint32_t)(h + 1);
    begin(map);
    assert_int_equal(stats_of(map).moved_home, 1);
    assert_int_equal(slot_of(map, x), h + 1);
    assert_int_equal(slot_of(map, y), h + 3);
    commit(map);
    assert_int_equal(read_now(map, x), 1);
    assert_int_equal(read_now(map, y), 1);
    sxe_map_destroy(map);
}

/*
 * A successor nearer home than the old version's slot stays: keys x and y share home h, at h + 1
 * and h; y is deleted, and x's new version takes y's slot, h, before its old one.
 */
static void test_a_successor_nearer_home_stays(void **state)
{
    uint64_t x, y, h;

    (void)state;
    sxe_map_t *map = two_sharing_a_home(&x, &y, &h);
    begin(map);
    assert_int_equal(delete (map, y), 0);
    commit(map);
    begin(map); /* h becomes a tombstone: x, at h + 1, probes past it */
    assert_int_equal(sxe__map_slot(map, h)->tag, SXE__MAP_TOMBSTONE);
    assert_int_equal(put(map, x, 1), 1);
    assert_int_equal(slot_of(map, x), h);
    commit(map);
    begin(map);
    assert_int_equal(stats_of(map).moved_home, 0);
    assert_int_equal(slot_of(map, x), h);
    commit(map);
    assert_int_equal(read_now(map, x), 1);
    sxe_map_destroy(map);
}

/* A successor deleted by the transaction that made it is a free slot, and moves nothing. */
static void test_a_successor_deleted_at_once_moves_nothing(void **state)
{
    (void)state;
    sxe_map_t *map = make_map(fixed_options(16));
    begin(map);
    assert_int_equal(put(map, 3, 0), 0);
    commit(map);
    begin(map);
    assert_int_equal(put(map, 3, 1), 1);
    uint64_t successor = slot_of(map, 3);
    assert_int_equal(delete (map, 3), 0);
    assert_false(sxe__map_is_entry(sxe__map_slot(map, successor)->tag)); /* free (trimmed) */
    commit(map);
    begin(map);
    assert_int_equal(stats_of(map).reclaimed, 1);
    assert_int_equal(stats_of(map).moved_home, 0);
    commit(map);
    assert_int_equal(read_now(map, 3), -1);
    assert_int_equal(stats_of(map).count, 0);
    sxe_map_destroy(map);
}

/* A successor out of range (a delete's, or a damaged hint) moves nothing. */
static void test_a_successor_out_of_range_moves_nothing(void **state)
{
    uint32_t hints[] = {SXE__MAP_NO_SUCCESSOR, 0};

    (void)state;
    for (unsigned i = 0; i < 2; i++) {
        sxe_map_t *map = make_map(fixed_options(16));
        hints[1] = (uint32_t)map->slot_count;
        begin(map);
        assert_int_equal(put(map, 4, 0), 0);
        commit(map);
        begin(map);
        assert_int_equal(put(map, 4, 1), 1);
        commit(map);
        uint64_t now = slot_of(map, 4);
        map->successors[(map->header->ring_tail - 1) % map->old_versions] = hints[i];
        begin(map);
        assert_int_equal(stats_of(map).reclaimed, 1);
        assert_int_equal(stats_of(map).moved_home, 0);
        assert_int_equal(slot_of(map, 4), now);
        commit(map);
        sxe_map_destroy(map);
    }
}

/*
 * Variable sizes: a moved entry gets a block of its own, which outlives the one it was copied from;
 * with no block free for it, the entry stays where it is.
 */
static void test_variable_entries_move_with_a_block_of_their_own(void **state)
{
    char big[3000];
    size_t size;

    (void)state;
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (unsigned arena_full = 0; arena_full <= 1; arena_full++) {
        sxe_map_t *map = make_map(variable_options(8, arena_full ? 4096 : 16384));
        begin(map);
        assert_int_equal(put_text(map, "word", "short"), 0);
        commit(map);
        begin(map);
        assert_int_equal(put_text(map, "word", big), 1);
        commit(map);
        begin(map);
        assert_int_equal(stats_of(map).moved_home, arena_full ? 0 : 1);
        commit(map);
        begin(map); /* reclaims the slot the move left, and its block */
        commit(map);
        struct sxe_map_reader reader;
        assert_int_equal(sxe_map_read_begin(map, &reader), 0);
        const char *value = sxe_map_find(&reader, "word", 4, &size);
        assert_int_equal(size, strlen(big));
        assert_memory_equal(value, big, size);
        sxe_map_read_end(&reader);
        assert_int_equal(stats_of(map).pending, 0);
        sxe_map_destroy(map);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_replaced_keys_stay_near_home, reset),
        cmocka_unit_test_teardown(test_a_move_is_a_version, reset),
        cmocka_unit_test_teardown(test_abort_undoes_a_move, reset),
        cmocka_unit_test_teardown(test_moves_wait_while_the_ring_is_half_full, reset),
        cmocka_unit_test_teardown(test_a_successor_replaced_again_stays, reset),
        cmocka_unit_test_teardown(test_a_successor_made_by_this_transaction_stays, reset),
        cmocka_unit_test_teardown(test_a_successor_nearer_home_stays, reset),
        cmocka_unit_test_teardown(test_a_successor_deleted_at_once_moves_nothing, reset),
        cmocka_unit_test_teardown(test_a_successor_out_of_range_moves_nothing, reset),
        cmocka_unit_test_teardown(test_variable_entries_move_with_a_block_of_their_own, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The hash table's validator and repair: each kind of damage named where it is (a tag, a
 * displacement, a stripe's count, a wrong record, the arena) and mended, a writer that dies
 * holding a stripe's lock rolled back, and writers in several processes at once.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hash_inline.h"
#include "hash_test.h"

static uint64_t tag_of_slot(sxe_hash_t *hash, uint64_t index)
{
    uint64_t tag;
    memcpy(&tag, sxe__hash_slots(hash, 0) + index * hash->slot_size, 8);
    return tag;
}

static void set_tag_of_slot(sxe_hash_t *hash, uint64_t index, uint64_t tag)
{
    memcpy(sxe__hash_slots(hash, 0) + index * hash->slot_size, &tag, 8);
}

/* Breaks the table as findings expect, checks the validator names it, then repairs it. */
static void expect_invalid_then_repair(sxe_hash_t *hash, const char *finding, uint64_t entries)
{
    struct sxe_test_capture capture;

    sxe_test_capture_start(&capture);
    assert_int_equal(sxe__hash_validate(hash), -EUCLEAN);
    sxe__hash_repair(hash, 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, finding));
    assert_int_equal(sxe__hash_validate(hash), 0);
    assert_int_equal(sxe_hash_count(hash), entries);
}

/* The validator finds each kind of damage, and the repair undoes it. */
static void test_validate_finds_damage_and_repair_mends_it(void **state)
{
    sxe_hash_t *hash = make_fixed(30, 95, 0);
    uint64_t slots = hash->slots_per_stripe, displaced = UINT64_MAX, empty = UINT64_MAX;

    (void)state;
    for (uint64_t key = 0; key < 30; key++) {
        put_fixed(hash, key, key, 0);
    }
    for (uint64_t i = 0; i < slots; i++) {
        uint64_t tag = tag_of_slot(hash, i);
        if (tag == 0 && empty == UINT64_MAX) {
            empty = i;
        } else if (tag != 0 && displaced == UINT64_MAX && sxe__hash_home(hash, tag) != i &&
                   tag_of_slot(hash, (i + slots - 1) % slots) != 0) {
            displaced = i;
        }
    }
    assert_true(displaced != UINT64_MAX && empty != UINT64_MAX);

    set_tag_of_slot(hash, displaced, tag_of_slot(hash, displaced) ^ 2);
    expect_invalid_then_repair(hash, "its tag is not its key's hash", 29);

    struct sxe_test_capture capture;
    hash->entries++;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe__hash_validate(hash), -EUCLEAN);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "the table's count differs from its entries"));
    hash->entries--;
    sxe__hash_stripe(hash, 0)->count++;
    hash->entries++;
    expect_invalid_then_repair(hash, "the stripe's count differs from its entries", 29);

    /* A second copy of an entry in the empty slot ending its chain. */
    for (uint64_t i = 0; i < slots; i++) {
        uint64_t tag = tag_of_slot(hash, i), next = (i + 1) % slots;
        if (tag != 0 && tag_of_slot(hash, next) == 0) {
            memcpy(sxe__hash_slots(hash, 0) + next * hash->slot_size,
                   sxe__hash_slots(hash, 0) + i * hash->slot_size, hash->slot_size);
            break;
        }
    }
    sxe__hash_stripe(hash, 0)->count++;
    hash->entries++;
    expect_invalid_then_repair(hash, "its key is also in an earlier slot", 29);

    /* A gap: the slot before a displaced entry, emptied. */
    for (uint64_t i = 0; i < slots; i++) {
        uint64_t tag = tag_of_slot(hash, i), before = (i + slots - 1) % slots;
        if (tag != 0 && sxe__hash_home(hash, tag) != i && tag_of_slot(hash, before) != 0) {
            set_tag_of_slot(hash, before, 0);
            break;
        }
    }
    expect_invalid_then_repair(hash, "its chain has a gap before it", 28);
    sxe_hash_destroy(hash);

    /* A locked table's validator lets go of the stripe it found wrong. */
    hash = make_fixed(30, 95, SXE_HASH_LOCKED);
    put_fixed(hash, 1, 1, 0);
    sxe__hash_stripe(hash, 0)->count++;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe__hash_validate(hash), -EUCLEAN);
    sxe_test_capture_stop();
    assert_int_equal(pthread_mutex_trylock(&sxe__hash_stripe(hash, 0)->lock), 0);
    assert_int_equal(pthread_mutex_unlock(&sxe__hash_stripe(hash, 0)->lock), 0);
    sxe_hash_destroy(hash);
}

/* A variable-size stripe's repair rebuilds its free lists from the live records. */
static void test_repair_rebuilds_the_arena(void **state)
{
    sxe_hash_t *hash = make_variable(50, 4096);
    struct sxe_hash_stats before, after;
    char key[16];

    (void)state;
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "key%d", i);
        put_text(hash, key, i % 2 ? "an odd value, longer than sixteen bytes" : "even", 0);
    }
    for (int i = 0; i < 40; i += 3) {
        snprintf(key, sizeof(key), "key%d", i);
        assert_int_equal(sxe_hash_delete(hash, key, strlen(key)), 0);
    }
    /* A record pointed past the arena is found, and its entry dropped by the repair. */
    unsigned char *slots = sxe__hash_slots(hash, 0);
    uint64_t i = 0;
    while (tag_of_slot(hash, i) == 0) {
        i++;
    }
    uint64_t saved_offset;
    memcpy(&saved_offset, slots + i * hash->slot_size + 8, 8);
    uint64_t bad_offset = 1ULL << 40;
    memcpy(slots + i * hash->slot_size + 8, &bad_offset, 8);
    assert_int_equal(sxe__hash_validate(hash), -EUCLEAN);
    memcpy(slots + i * hash->slot_size + 8, &saved_offset, 8);

    sxe_hash_stats(hash, &before);
    memset(sxe__hash_stripe(hash, 0)->free_heads, 0, sizeof(sxe__hash_stripe(hash, 0)->free_heads));
    sxe__hash_repair(hash, 0);
    assert_int_equal(sxe__hash_validate(hash), 0);
    sxe_hash_stats(hash, &after);
    assert_int_equal(after.arena_used, before.arena_used);
    assert_int_equal(after.recoveries, 1);
    /* The freed blocks are found again: the arena takes as many new records as before. */
    int added = 0;
    for (int n = 100; n < 200; n++) {
        snprintf(key, sizeof(key), "key%d", n);
        if (sxe_hash_put(hash, key, strlen(key), "an odd value, longer than sixteen bytes", 39) <
            0) {
            break;
        }
        added++;
    }
    assert_int_equal(sxe__hash_validate(hash), 0);
    assert_true(added >= 14);
    assert_int_equal(sxe_hash_count(hash), 40 - 14 + (uint64_t)added);
    sxe_hash_destroy(hash);
}

/* Copies slot from into slot to of stripe 0, as a shift cut short by a death leaves it. */
static void copy_slot(sxe_hash_t *hash, uint64_t from, uint64_t to)
{
    unsigned char *slots = sxe__hash_slots(hash, 0);
    memcpy(slots + to * hash->slot_size, slots + from * hash->slot_size, hash->slot_size);
}

static void die_mid_shift(sxe_hash_t *hash, uint64_t occupied, uint64_t empty)
{
    sxe__hash_lock(hash, 0);
    copy_slot(hash, occupied, empty); /* a second copy of a key */
    unsigned char *slots = sxe__hash_slots(hash, 0);
    slots[occupied * hash->slot_size + 8] ^= 0xff; /* a torn body under its old tag */
    raise(SIGKILL);
}

/* A process killed holding a stripe's lock, mid-change: the next locker repairs the stripe. */
static void test_repair_after_death_holding_a_lock(void **state)
{
    struct sxe_hash_options options = {.name = "shared",
                                       .capacity = 20,
                                       .key_size = 8,
                                       .value_size = sizeof(struct value),
                                       .stripes = 1,
                                       .flags = SXE_HASH_SHARED};
    struct sxe_test_capture capture;
    sxe_hash_t *hash = NULL;
    uint64_t occupied = UINT64_MAX, empty = UINT64_MAX, torn_key = 0;
    int status;

    (void)state;
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    for (uint64_t key = 1; key <= 12; key++) {
        put_fixed(hash, key, key, 0);
    }
    unsigned char *slots = sxe__hash_slots(hash, 0);
    for (uint64_t i = 0; i < hash->slots_per_stripe; i++) {
        uint64_t tag;
        memcpy(&tag, slots + i * hash->slot_size, 8);
        if (tag == 0 && empty == UINT64_MAX) {
            empty = i;
        } else if (tag != 0 && occupied == UINT64_MAX) {
            occupied = i;
            memcpy(&torn_key, slots + i * hash->slot_size + 8, 8);
        }
    }
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        die_mid_shift(hash, occupied, empty);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    sxe_test_capture_start(&capture);
    uint64_t new_key = 100;
    struct value new_value = {100, ~100ULL};
    assert_int_equal(sxe_hash_put(hash, &new_key, 8, &new_value, sizeof(new_value)), 0);
    sxe_test_capture_stop();
    assert_int_equal(sxe__hash_validate(hash), 0);
    assert_non_null(strstr(capture.text, "a process died holding stripe 0's lock"));
    assert_non_null(strstr(capture.text, "was torn by the death; dropped"));
    struct sxe_hash_stats stats;
    sxe_hash_stats(hash, &stats);
    assert_int_equal(stats.recoveries, 1);
    /* The torn slot is gone; the copy of it is the one that stays, whole. */
    assert_int_equal(sxe_hash_count(hash), 13);
    for (uint64_t key = 1; key <= 12; key++) {
        const struct value *found = sxe_hash_find(hash, &key, 8, NULL);
        assert_non_null(found);
        assert_int_equal(found->a, key);
    }
    (void)torn_key;
    sxe_hash_destroy(hash);
}

/* Four processes put and delete their own keys in one shared, striped table at once. */
static void test_writers_in_several_processes(void **state)
{
    struct sxe_hash_options options = {.name = "race",
                                       .capacity = 4000,
                                       .key_size = 8,
                                       .value_size = sizeof(struct value),
                                       .stripes = 8,
                                       .flags = SXE_HASH_SHARED};
    sxe_hash_t *hash = NULL;
    pid_t children[4];
    int status;

    (void)state;
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    for (unsigned c = 0; c < 4; c++) {
        children[c] = fork();
        assert_true(children[c] >= 0);
        if (children[c] == 0) {
            for (unsigned round = 0; round < 20; round++) {
                for (uint64_t i = 0; i < 500; i++) {
                    uint64_t key = c * 1000 + i;
                    struct value value = {round, key};
                    if (sxe_hash_put(hash, &key, 8, &value, sizeof(value)) < 0 ||
                        (round % 2 == 1 && i % 2 == 0 && sxe_hash_delete(hash, &key, 8) != 0)) {
                        sxe_test_exit(1);
                    }
                }
            }
            sxe_test_exit(0);
        }
    }
    for (unsigned c = 0; c < 4; c++) {
        assert_int_equal(waitpid(children[c], &status, 0), children[c]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(sxe__hash_validate(hash), 0);
    assert_int_equal(sxe_hash_count(hash), 4 * 250); /* the last round deleted the even keys */
    for (uint64_t c = 0; c < 4; c++) {
        for (uint64_t i = 1; i < 500; i += 2) {
            uint64_t key = c * 1000 + i;
            struct value got;
            assert_int_equal(sxe_hash_get(hash, &key, 8, &got, sizeof(got)), sizeof(got));
            assert_int_equal(got.a, 19);
            assert_int_equal(got.b, key);
        }
    }
    sxe_hash_destroy(hash);
}

/* A stripe whose every slot holds an entry has nowhere for a probe to stop: the validator names
 * it (the limits that keep puts from filling it are raised here by hand). */
static void test_a_stripe_without_an_empty_slot_is_invalid(void **state)
{
    sxe_hash_t *hash = make_fixed(30, 95, 0);
    struct sxe_test_capture capture;
    struct value value = {1, 2};

    (void)state;
    assert_int_equal(hash->stripe_count, 1);
    hash->stripe_limit = hash->slots_per_stripe;
    hash->capacity = hash->slots_per_stripe;
    for (uint64_t key = 0; sxe__hash_stripe(hash, 0)->count < hash->slots_per_stripe - 1; key++) {
        assert_int_equal(sxe_hash_put(hash, &key, 8, &value, sizeof(value)), 0);
    }
    assert_int_equal(sxe__hash_validate(hash), 0); /* one empty slot left */
    uint64_t key = 1000;
    assert_int_equal(sxe_hash_put(hash, &key, 8, &value, sizeof(value)), 0);
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe__hash_validate(hash), -EUCLEAN);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "the stripe has no empty slot"));
    sxe_hash_destroy(hash);
}

/* A stripe that counts fewer entries than it holds (the other way than the test above mends):
 * the repair counts them again, and the table's total with them. */
static void test_repair_mends_a_stripe_that_counts_too_few(void **state)
{
    sxe_hash_t *hash = make_fixed(30, 95, 0);

    (void)state;
    for (uint64_t key = 0; key < 10; key++) {
        put_fixed(hash, key, key, 0);
    }
    sxe__hash_stripe(hash, 0)->count -= 3;
    hash->entries -= 3;
    expect_invalid_then_repair(hash, "the stripe's count differs from its entries", 10);
    sxe_hash_destroy(hash);
}

/* A variable-size entry whose record reference is wrong in each way the validator checks (no
 * key, an offset off the 16-byte grid, past the arena's end, a record that runs past it): each is
 * named with its stripe and slot, and the table is valid again once it is put back. */
static void test_each_kind_of_wrong_record_is_named_where_it_is(void **state)
{
    sxe_hash_t *hash = make_variable(50, 4096);
    struct sxe_test_capture capture;
    unsigned stripe = 0;
    uint64_t index = 0;
    char want[128];

    (void)state;
    put_text(hash, "one", "first", 0);
    put_text(hash, "two", "second", 0);
    for (stripe = 0; stripe < hash->stripe_count; stripe++) {
        for (index = 0; index < hash->slots_per_stripe; index++) {
            uint64_t tag;
            memcpy(&tag, sxe__hash_slots(hash, stripe) + index * hash->slot_size, 8);
            if (tag != 0) {
                goto found;
            }
        }
    }
    fail_msg("no entry found");
found:;
    unsigned char *slot = sxe__hash_slots(hash, stripe) + index * hash->slot_size;
    struct sxe__hash_record_ref ref = sxe__hash_ref(slot), wrong;
    uint64_t end = sxe__hash_stripe(hash, stripe)->arena_next;
    snprintf(want, sizeof(want), "hash words invalid: stripe %u slot %llu: its record is outside",
             stripe, (unsigned long long)index);
    for (int kind = 0; kind < 4; kind++) {
        wrong = ref;
        if (kind == 0) {
            wrong.key_size = 0;
        } else if (kind == 1) {
            wrong.offset += 8;
        } else if (kind == 2) {
            wrong.offset = end;
        } else {
            wrong.value_size = (uint32_t)(end - ref.offset); /* its block runs past the end */
        }
        memcpy(slot + 8, &wrong, sizeof(wrong));
        sxe_test_capture_start(&capture);
        assert_int_equal(sxe__hash_validate(hash), -EUCLEAN);
        sxe_test_capture_stop();
        if (strstr(capture.text, want) == NULL) {
            fail_msg("kind %d: want \"%s\", got: %s", kind, want, capture.text);
        }
        memcpy(slot + 8, &ref, sizeof(ref));
        assert_int_equal(sxe__hash_validate(hash), 0);
    }
    sxe_hash_destroy(hash);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_validate_finds_damage_and_repair_mends_it, reset),
        cmocka_unit_test_teardown(test_repair_rebuilds_the_arena, reset),
        cmocka_unit_test_teardown(test_repair_after_death_holding_a_lock, reset),
        cmocka_unit_test_teardown(test_writers_in_several_processes, reset),
        cmocka_unit_test(test_a_stripe_without_an_empty_slot_is_invalid),
        cmocka_unit_test(test_repair_mends_a_stripe_that_counts_too_few),
        cmocka_unit_test(test_each_kind_of_wrong_record_is_named_where_it_is),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

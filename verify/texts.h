/*
 * texts.h — real text kvverify feeds models that have a tokenizer: a story
 * long enough to make every eviction policy evict (>= 256 tokens with the
 * stories260K vocabulary), and the turns of a scripted conversation for
 * `kvverify memory`, and the varied prompts `kvverify evict` measures
 * over. Written for kvverify in the simple style of the TinyStories data the
 * stories260K model was trained on.
 */
#ifndef KVV_TEXTS_H
#define KVV_TEXTS_H

extern const char kvv_text_story[];

#define KVV_TEXT_TURNS 20
extern const char *const kvv_text_turns[KVV_TEXT_TURNS];

/* The prompt set of `kvverify evict`: short names (shown in reports) and
 * texts of different kinds. */
typedef struct {
    const char *name;
    const char *text;
} kvv_text_prompt;

#define KVV_TEXT_PROMPTS 8
extern const kvv_text_prompt kvv_text_prompts[KVV_TEXT_PROMPTS];

#endif
